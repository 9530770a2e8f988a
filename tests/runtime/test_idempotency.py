"""A client's turn id is an idempotency key for its request: the same id and request return the
stored turn; the same id with another request is refused and writes nothing."""

from __future__ import annotations

import pytest

from turnframe_runtime import IdempotencyKeyReused
from turnframe_test import DeskHarness, act

NAME = "trip.set_name"


async def test_the_same_turn_id_and_request_return_the_stored_turn(desk: DeskHarness) -> None:
    desk.ready_trip()
    first = await desk.say("Name Grace Hopper", act("a1", NAME, "h1", "Grace", name="Grace Hopper"),
                           turn_id="turn_client_1")  # fmt: skip
    again = await desk.say("Name Grace Hopper", act("a1", NAME, "h1", "Grace", name="Grace Hopper"),
                           turn_id="turn_client_1")  # fmt: skip
    assert again.to_stored_json() == first.to_stored_json()
    assert await desk.event_types() == ["trip.name_set"]


@pytest.mark.parametrize("change", ["other words", "another conversation"])
async def test_the_same_turn_id_with_another_request_is_refused_and_writes_nothing(
    desk: DeskHarness, change: str
) -> None:
    desk.ready_trip()
    first = await desk.say("Name Grace Hopper", act("a1", NAME, "h1", "Grace", name="Grace Hopper"),
                           turn_id="turn_client_1")  # fmt: skip
    if change == "another conversation":
        desk.conversation_id = "conv_other"
    text = "Name Ada Lovelace" if change == "other words" else "Name Grace Hopper"
    with pytest.raises(IdempotencyKeyReused):
        await desk.say(text, act("a1", NAME, "h1", "Ada", name="Ada Lovelace"),
                       turn_id="turn_client_1")  # fmt: skip
    assert await desk.event_types() == ["trip.name_set"]
    stored = await desk.runtime.load_turn("acct_1", "turn_client_1")
    assert stored.to_stored_json() == first.to_stored_json()
    assert await desk.stores.conversations.list_turns("acct_1", "conv_other") == ()


@pytest.mark.slow
async def test_two_requests_racing_on_one_turn_id_get_one_reply_and_one_refusal(
    desk: DeskHarness,
) -> None:
    """Sent at once with one turn id and different words: one is the turn, the other is told the
    id was reused; the database never answers anything else and no turn is left unfinished."""
    import asyncio

    from turnframe_core import TurnInput
    from turnframe_test.understandings import understanding

    desk.ready_trip()
    for i in range(40):
        # Only the request that wins the id reaches the interpreter.
        name = f"Grace {'Abcdefghij'[i % 10]}{'klmnopqrst'[i // 10]}"  # letters only
        desk.interpreter.then(understanding(act("a1", NAME, "h1", name, name=name)))
        requests = [
            TurnInput(
                account_id="acct_1", conversation_id="conv_1", turn_id=f"turn_r{i}", text=text
            )
            for text in (f"Name {name}", f"Call the traveller {name}")
        ]
        outcomes = await asyncio.gather(
            *(desk.runtime.handle_turn(r) for r in requests), return_exceptions=True
        )
        kinds = sorted(type(o).__name__ for o in outcomes)
        assert kinds == ["AssistantTurn", "IdempotencyKeyReused"], (i, outcomes)
    assert await desk.stores.conversations.list_unfinished_turns(100) == ()
    assert len(await desk.event_types()) == 40


async def test_a_retry_of_a_turn_that_failed_before_any_effect_is_told_so(
    desk: DeskHarness,
) -> None:
    from turnframe_runtime import TurnFailed
    from turnframe_store import FaultPoint, Unavailable

    desk.ready_trip()
    desk.stores.faults.arm(FaultPoint.BEFORE_JOURNAL_INSERT, error=Unavailable("down"))
    with pytest.raises(Unavailable):
        await desk.say("Name Grace Hopper", act("a1", NAME, "h1", "Grace", name="Grace Hopper"),
                       turn_id="turn_client_9")  # fmt: skip
    with pytest.raises(TurnFailed) as failed:  # not "in progress" forever
        await desk.say("Name Grace Hopper", act("a1", NAME, "h1", "Grace", name="Grace Hopper"),
                       turn_id="turn_client_9")  # fmt: skip
    assert failed.value.failure_code == Unavailable.code
    assert await desk.events() == []
    fresh = await desk.say("Name Grace Hopper", act("a1", NAME, "h1", "Grace", name="Grace Hopper"))
    assert desk.receipt_codes(fresh) == ["trip.name_set"]
