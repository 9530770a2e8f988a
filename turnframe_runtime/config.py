"""Runtime configuration (conservative defaults)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RuntimeConfig"]


@dataclass(frozen=True)
class RuntimeConfig:
    """How a runtime behaves where the design leaves a choice.

    - `locales`: the languages served; the runtime refuses to start while server copy lacks any.
    - `restore_card_after_failed_command`: a card whose command failed becomes answerable again
      (True) or ends `failed` (False).
    - `max_selection_candidates`: a selection card lists at most this many cases.
    - `settle_wait_ms`: kept for compatibility and no longer used: turns of one conversation never
      overlap, so no turn waits for another to settle a card (decision 0012).
    - `conversation_wait_ms`: how long a turn waits for the turn before it in the same
      conversation to end (turns of one conversation never interleave); past it the turn is
      refused with `ConversationBusy`, having written nothing.
    """

    locales: tuple[str, ...] = ("en",)
    restore_card_after_failed_command: bool = True
    max_selection_candidates: int = 5
    settle_wait_ms: int = 3_000
    conversation_wait_ms: int = 10_000
