"""The pydantic base every core model derives from, and the constrained types the packages
share (ids, counts, instants); the stores and the runtime build their records on it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "MAX_WHOLE",
    "FrozenModel",
    "Millis",
    "NonEmptyStr",
    "Remembering",
    "Revision",
    "Whole",
    "without_unset_additions",
]

_T = TypeVar("_T")
#: the `__dict__` key of `Remembering.cached` (a leading underscore: pydantic's iteration, repr and
#: serialization skip it)
_CACHE = "_turnframe_cached"
#: the `cached` name `mark_checked` sets (not a name a caller of `cached` uses)
_CHECKED = "\x00checked"


class Remembering(BaseModel):
    """A model that may remember values derived from its fields (`cached`); immutable
    subclasses only (internal)."""

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy, without what `cached` remembered of this instance (an update changes it)."""
        copied = super().model_copy(update=update, deep=deep)
        copied.__dict__.pop(_CACHE, None)
        return copied

    @classmethod
    def from_valid(cls, **fields: Any) -> Self:
        """An instance of these fields without validating them again (internal): only for values
        that already passed the same field types (taken from a validated instance whose fields
        carry at least these constraints); never for anything a caller or a stored row gave.
        Every field must be given."""
        instance = cls.__new__(cls)
        object.__setattr__(instance, "__dict__", fields)
        object.__setattr__(instance, "__pydantic_fields_set__", set(fields))
        object.__setattr__(instance, "__pydantic_extra__", None)
        object.__setattr__(instance, "__pydantic_private__", None)
        return instance

    def checked(self) -> bool:
        """Whether this instance's own rules (its `mode="after"` validators) already passed.
        Pydantic runs those validators again each time a validated instance is placed in
        another model (a turn in a bundle and in a stream event, an envelope in a batch); a
        validator that ends in `mark_checked` starts with this and skips the repeat. A copy
        (`model_copy`), `model_construct` and `from_valid` are unmarked, so they are checked."""
        memory = self.__dict__.get(_CACHE)
        return memory is not None and _CHECKED in memory

    def mark_checked(self) -> None:
        """Record that this instance's own rules passed (call it last in the validator)."""
        self.cached(_CHECKED, lambda: True)

    def cached(self, name: str, compute: Callable[[], _T]) -> _T:
        """`compute()`, remembered on this instance under `name`: for a value derived from the
        fields only (a digest, canonical bytes), which a frozen instance cannot change. The
        memory lives in the instance's `__dict__` under a private key, so it is neither a field
        nor serialized nor compared; `model_copy` drops it."""
        memory: dict[str, Any] | None = self.__dict__.get(_CACHE)
        if memory is None:
            memory = self.__dict__[_CACHE] = {}
        elif name in memory:
            return memory[name]  # type: ignore[no-any-return]
        value = memory[name] = compute()
        return value


class FrozenModel(Remembering):
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
#: The largest whole number a model carries: a signed 64-bit integer, what every store keeps.
MAX_WHOLE = 2**63 - 1
#: A count, size or revision: an int (never a bool, a float or a numeric string, in Python or in
#: JSON) from 0 to `MAX_WHOLE`.
Whole = Annotated[int, Field(strict=True, ge=0, le=MAX_WHOLE)]
#: A case revision; 0 means "the case does not exist yet".
Revision = Whole
NonEmptyStr = Annotated[str, Field(min_length=1)]


def without_unset_additions(data: Any, additions: dict[str, Any]) -> Any:
    """A field added after records were first stored is left out while it holds its default, so
    a record written before it serializes, and digests, exactly as it did (the replay chain
    cites those digests)."""
    if isinstance(data, dict):
        for name, default in additions.items():
            value = data.get(name, default)
            if value == default or (isinstance(default, tuple) and value == list(default)):
                data.pop(name, None)
    return data
