"""The root of Turnframe's typed errors: every error carries a stable dotted code."""

from __future__ import annotations

from typing import ClassVar

__all__ = ["TurnframeError"]


class TurnframeError(Exception):
    """Base of every error Turnframe raises on purpose.

    `code` is stable (it appears in notices, metrics and logs); the message never carries secrets,
    raw payloads or another account's identifiers.
    """

    code: ClassVar[str] = "turnframe.error"  # codes.ERROR (codes imports nothing of ours)

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.code)
        self.message = message or self.code

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"
