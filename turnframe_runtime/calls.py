"""What a model port may tell the replay record about its last call: the provider, the model,
the digest of the prompt it sent and the tokens the provider counted.

A port calls `note_model_call` before it returns or raises; the runtime takes the note when it
records the call (`take_model_call`). The note lives in a context variable holding an immutable
value, so turns running side by side never read each other's calls; a port that notes nothing
leaves the record's fields unset.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["ModelCall", "note_model_call", "take_model_call"]


@dataclass(frozen=True)
class ModelCall:
    """One call a model port made, as the replay record names it."""

    provider: str
    model: str
    prompt_digest: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    request_id: str | None = None


_last: ContextVar[ModelCall | None] = ContextVar("turnframe_model_call", default=None)


def note_model_call(call: ModelCall) -> None:
    """Tell the runtime about the call a port is about to return (or raise) from."""
    _last.set(call)


def take_model_call() -> ModelCall | None:
    """The call noted since the last take, if any; the note is cleared."""
    call = _last.get()
    if call is not None:
        _last.set(None)
    return call
