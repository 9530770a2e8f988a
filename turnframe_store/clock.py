"""Clocks a store stamps lifecycle times with: integer milliseconds since the epoch."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["Clock", "ManualClock", "system_clock"]

#: Returns the current time in integer milliseconds since the Unix epoch.
Clock = Callable[[], int]


def system_clock() -> int:
    return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to (tests and deterministic replays)."""

    def __init__(self, start: int = 1_700_000_000_000) -> None:
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            return self._now

    def advance(self, ms: int) -> int:
        """Move forward by `ms` (never backward) and return the new time."""
        if ms < 0:
            raise ValueError("a clock never moves backward")
        with self._lock:
            self._now += ms
            return self._now

    def set(self, now: int) -> None:
        """Jump to `now`, which may not be earlier than the current time."""
        with self._lock:
            if now < self._now:
                raise ValueError("a clock never moves backward")
            self._now = now
