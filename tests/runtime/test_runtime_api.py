"""TurnRuntime's own surface."""

from __future__ import annotations

import pytest

from turnframe_core import TURN_SCHEMA_VERSION
from turnframe_test import DeskHarness, act


async def test_the_runtimes_collaborators_cannot_be_replaced(desk: DeskHarness) -> None:
    for name in ("stores", "workflows", "directory", "executor", "config"):
        with pytest.raises(AttributeError):
            setattr(desk.runtime, name, None)


async def test_the_runtimes_workflows_cannot_be_changed_through_its_mapping(
    desk: DeskHarness,
) -> None:
    with pytest.raises(TypeError):
        desk.runtime.workflows["other"] = desk.runtime.workflows["trip"]  # type: ignore[index]


async def test_a_conversation_reloads_as_its_last_turns_exactly_as_returned(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    returned = [
        await desk.say(f"Name {name}", act("a1", "trip.set_name", "h1", name, name=name))
        for name in ("Grace Hopper", "Ada Lovelace", "Edith Clarke")
    ]

    loaded = await desk.runtime.load_conversation("acct_1", "conv_1", limit=2)

    assert [t.to_stored_json() for t in loaded] == [t.to_stored_json() for t in returned[1:]]
    assert await desk.runtime.load_conversation("acct_2", "conv_1") == ()


async def test_a_returned_turn_carries_the_schema_version_it_is_stored_with(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    turn = await desk.say("Name Grace", act("a1", "trip.set_name", "h1", "Grace", name="Grace"))

    loaded = await desk.runtime.load_turn("acct_1", turn.turn_id)

    assert turn.schema_version == loaded.schema_version == TURN_SCHEMA_VERSION
    assert f'"schema_version":"{TURN_SCHEMA_VERSION}"' in loaded.to_stored_json()
