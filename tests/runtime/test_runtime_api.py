"""TurnRuntime's own surface."""

from __future__ import annotations

import pytest

from turnframe_test import DeskHarness


async def test_the_runtimes_collaborators_cannot_be_replaced(desk: DeskHarness) -> None:
    for name in ("stores", "workflows", "directory", "executor", "config"):
        with pytest.raises(AttributeError):
            setattr(desk.runtime, name, None)


async def test_the_runtimes_workflows_cannot_be_changed_through_its_mapping(
    desk: DeskHarness,
) -> None:
    with pytest.raises(TypeError):
        desk.runtime.workflows["other"] = desk.runtime.workflows["trip"]  # type: ignore[index]
