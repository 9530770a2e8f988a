"""`handle_turn` takes a `TurnInput` and nothing else: anything else is `InvalidTurnInput` before a
single read or write, on every backend."""

from __future__ import annotations

import json
from typing import Any

import pytest

from turnframe_core import InvalidTurnInput, TurnInput, codes
from turnframe_runtime import follow_up_turn_id
from turnframe_runtime.recover import settled_turn_id
from turnframe_runtime.server_event import event_turn_id
from turnframe_store import NotFound
from turnframe_test.harness import DeskHarness

SENT: dict[str, Any] = {"account_id": "acct_1", "conversation_id": "conv_1", "text": "Hello"}


async def _nothing_written(desk: DeskHarness) -> None:
    with pytest.raises(NotFound):
        await desk.stores.conversations.get_conversation("acct_1", "conv_1")
    assert await desk.stores.conversations.list_unfinished_turns(10) == ()
    assert await desk.events() == []


@pytest.mark.parametrize(
    "sent", [SENT, json.dumps(SENT), None, 42], ids=["dict", "json", "none", "int"]
)
async def test_handle_turn_refuses_what_is_not_a_turn_input_and_writes_nothing(
    desk: DeskHarness, sent: object
) -> None:
    desk.ready_trip()

    with pytest.raises(InvalidTurnInput) as raised:
        await desk.runtime.handle_turn(sent)  # type: ignore[arg-type]

    assert raised.value.code == codes.TURN_INVALID_INPUT
    await _nothing_written(desk)


@pytest.mark.parametrize(
    "changes",
    [
        {"locale": "../../x"},
        {"locale": "en\x00"},
        {
            "attachments": [
                {"attachment_id": f"a{i}", "media_type": "text/plain"} for i in range(21)
            ]
        },
        {
            "interaction_response": {
                "interaction_id": "int_1",
                "option_id": "opt_yes",
                "expected_case_revision": "3",
            }
        },
    ],
)
async def test_a_refused_input_never_reaches_the_runtime(
    desk: DeskHarness, changes: dict[str, Any]
) -> None:
    desk.ready_trip()

    with pytest.raises(InvalidTurnInput):
        TurnInput.model_validate({**SENT, **changes})
    # Past its rules (model_copy and model_construct skip them), handle_turn still judges it.
    for bypassed in (
        TurnInput.model_validate(SENT).model_copy(update=changes),
        TurnInput.model_construct(**{**SENT, **changes}),
    ):
        with pytest.raises(InvalidTurnInput):
            await desk.runtime.handle_turn(bypassed)

    await _nothing_written(desk)


@pytest.mark.parametrize(
    "turn_id",
    [
        follow_up_turn_id("acct_1", "obx_1", "answer"),
        event_turn_id("acct_1", "bank", "evt-1"),
        settled_turn_id("acct_1", "turn_1", ["cmd_1"]),
    ],
    ids=["follow_up", "server_event", "settled"],
)
async def test_a_users_turn_never_takes_an_id_the_server_derives_for_its_own_turns(
    desk: DeskHarness, turn_id: str
) -> None:
    desk.ready_trip()
    sent = TurnInput.model_validate({**SENT, "turn_id": turn_id})

    with pytest.raises(InvalidTurnInput):
        await desk.runtime.handle_turn(sent)
    with pytest.raises(InvalidTurnInput):
        async for _ in desk.runtime.stream_turn(sent):
            pass

    await _nothing_written(desk)
