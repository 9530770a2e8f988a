"""Waiting in tests for a condition, never for a stretch of time: a test that orders events by
sleeping passes on an idle machine and fails on a loaded one.

`until(condition)` returns once `condition()` (a function, sync or async) is true and fails the
test, naming what it waited for, when its deadline passes first. Use an `asyncio.Event` where the
code under test can say when it got there; `until` where only its observable state can."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable

__all__ = ["until"]


async def until(
    condition: Callable[[], bool | Awaitable[bool]],
    what: str,
    *,
    timeout_s: float = 30.0,
    every_s: float = 0.005,
) -> None:
    """Return once `condition()` holds; `AssertionError` naming `what` after `timeout_s`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        held = condition()
        if inspect.isawaitable(held):
            held = await held
        if held:
            return
        if loop.time() > deadline:
            raise AssertionError(f"waited {timeout_s} s for {what}")
        await asyncio.sleep(every_s)
