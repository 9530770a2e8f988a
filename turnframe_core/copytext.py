"""Copy references: how a workflow names a sentence of server copy without writing it.

A workflow never knows the turn's locale when it projects, compiles or builds a card, so where it
produces words a user reads (a refusal, a card's title, body and labels, a next step, an
obligation's question) it returns a `Localized`: a template id and the parameters the template
needs. The runtime renders it in the turn's negotiated locale from the catalogs it serves, and
records which template, version, locale and catalog rendered it.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from turnframe_core.canonical import canonical_json
from turnframe_core.model import FrozenModel, NonEmptyStr

__all__ = ["Localized", "plain"]


class Localized(FrozenModel):
    """A sentence of server copy by reference: `template_id` rendered with `params` (data: a
    template formats them, never reads them as template code)."""

    template_id: NonEmptyStr
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _canonical(self) -> Localized:
        canonical_json(self.params)  # parameters are plain JSON data
        return self


def plain(text: str | Localized) -> str:
    """Text a workflow wrote itself, or a copy reference's template id (for logs and keys)."""
    return text if isinstance(text, str) else text.template_id
