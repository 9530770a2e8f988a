"""A turn whose commit point's COMMIT fails returns no reply and stores none (decision 0006):
the journal still says what may have run, for recovery. SQL only: the COMMIT itself is failed
through the backend's hook, which MemoryStores has no equivalent of."""

from __future__ import annotations

import pytest
from services import Databases

from turnframe_core import TurnPhase
from turnframe_store import JournalStatus, ManualClock, NotFound, Unavailable
from turnframe_test import DeskHarness, ScriptedNarrator, act


@pytest.mark.parametrize("narrated", [False, True])
async def test_a_commit_whose_commit_fails_leaves_no_reply(
    databases: Databases, narrated: bool
) -> None:
    clock = ManualClock()
    stores = await databases.migrated(clock=clock)
    narrator = ScriptedNarrator() if narrated else None
    desk = DeskHarness(
        stores=stores,
        clock=clock,
        narrator=narrator,
        reviewer=narrator.reviewer if narrator else None,
        narration="free",
    )
    desk.ready_trip()
    commits = 0

    async def fail_the_commit_point(pid: int) -> None:
        nonlocal commits
        commits += 1
        if commits == 3:  # 1: accept, 2: start, 3: the commit point
            raise Unavailable("the commit did not go through")

    stores.hooks.before_commit = fail_the_commit_point
    with pytest.raises(Unavailable):
        await desk.say("Name Ada Byron", act("a1", "trip.set_name", "h1", "Ada", name="Ada Byron"))
    [marker] = await stores.conversations.list_unfinished_turns(10)
    assert marker.phase is TurnPhase.EXECUTING
    [entry] = await desk.journal(marker.turn_id)
    assert entry.status is JournalStatus.EXECUTING  # recovery resumes it by its key
    assert await desk.events() == []
    with pytest.raises(NotFound):
        await stores.conversations.get_assistant_turn("acct_1", marker.turn_id)
