"""Two identical clicks on one card at once: the command runs once, and neither reply states
anything false. The loser says the card was already answered and shows the receipt of what the
winner committed (it waits, boundedly, for the winner to settle the card)."""

from __future__ import annotations

import asyncio

import pytest

from turnframe_core import codes
from turnframe_test import DeskHarness, act

WITHDRAW = "trip.withdraw"


@pytest.mark.slow
async def test_two_identical_concurrent_confirmations_run_once_and_state_nothing_false(
    desk: DeskHarness,
) -> None:
    repetitions = 200 if type(desk.stores).__name__ == "SqlStores" else 50
    for i in range(repetitions):
        desk.conversation_id = f"conv_{i}"
        desk.ready_trip(f"T-{i}", f"Trip {i}")
        asked = await desk.say("Cancel my trip", act("a1", WITHDRAW, "h1", "Cancel my trip"))
        card = desk.card(asked)
        first, second = await asyncio.gather(
            desk.click(card, "opt_confirm"), desk.click(card, "opt_confirm")
        )
        events = [e for e in await desk.events() if e.case_id == f"T-{i}"]
        assert [e.event_type for e in events] == ["trip.withdrawn"], i
        for turn in (first, second):
            assert codes.NOTICE_COMMAND_FAILED not in desk.notice_codes(turn), (i, turn.blocks)
            assert desk.receipt_codes(turn) == ["trip.withdrawn"], (i, turn.blocks)
        answered = [
            t for t in (first, second) if codes.NOTICE_ALREADY_ANSWERED in desk.notice_codes(t)
        ]
        assert len(answered) == 1, i
