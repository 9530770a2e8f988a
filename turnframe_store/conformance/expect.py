"""Expectations a check states; a failed one raises `AssertionError` (used by every section)."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from turnframe_store.errors import StoreError

E = TypeVar("E", bound=StoreError)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 400 else text[:400] + "…"


def equal(actual: Any, expected: Any, what: str) -> None:
    if actual != expected:
        raise AssertionError(f"{what}: expected {_show(expected)}, got {_show(actual)}")


def increasing(values: Sequence[int]) -> bool:
    return all(a < b for a, b in itertools.pairwise(values))


def true(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(what)


async def refused(kind: type[E], action: Awaitable[object], what: str) -> E:
    """Await `action`, which must raise `kind` (or a subclass); return the error."""
    try:
        await action
    except kind as exc:
        return exc
    except StoreError as exc:
        raise AssertionError(
            f"{what}: expected {kind.__name__}, got {type(exc).__name__} ({exc.code})"
        ) from None
    raise AssertionError(f"{what}: expected {kind.__name__}, but it was accepted")
