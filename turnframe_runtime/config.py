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
    - `settle_wait_ms`: how long a turn that answered a card another turn is still resolving
      waits for that turn to settle it, so the reply shows what committed (0: no wait).
    """

    locales: tuple[str, ...] = ("en",)
    restore_card_after_failed_command: bool = True
    max_selection_candidates: int = 5
    settle_wait_ms: int = 3_000
