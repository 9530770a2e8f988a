"""TurnRuntime's own surface."""

from __future__ import annotations

import pytest

from turnframe_test import DeskHarness


async def test_the_runtimes_collaborators_cannot_be_replaced(desk: DeskHarness) -> None:
    for name in ("stores", "workflows", "directory", "executor", "config"):
        with pytest.raises(AttributeError):
            setattr(desk.runtime, name, None)
