"""The pydantic base every core model derives from (internal)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["FrozenModel", "Millis", "NonEmptyStr", "Revision"]


class FrozenModel(BaseModel):
    """Immutable, closed model: unknown keys are refused, instances cannot be mutated."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        strict=False,
        validate_default=True,
        use_enum_values=False,
        ser_json_inf_nan="constants",
    )


#: Integer milliseconds since the Unix epoch (DESIGN §3).
Millis = Annotated[int, Field(ge=0)]
#: A case revision; 0 means "the case does not exist yet".
Revision = Annotated[int, Field(ge=0)]
NonEmptyStr = Annotated[str, Field(min_length=1)]
