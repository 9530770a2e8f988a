"""A client's turn id never takes a server-written turn's place: an id of the form the runtime
derives for its own turns (the follow-up the click named, a webhook event's turn) is refused
with 422 before anything is written, and the turn it names is still written by its owner."""

from __future__ import annotations

from typing import Any

import pytest
from http_api import ACCOUNT, CONVERSATION, Api, answer_body, card_of

from turnframe_core import ServerEvent, codes
from turnframe_runtime import HmacOrigin
from turnframe_runtime.server_event import event_turn_id
from turnframe_store import OutboxStatus

BANK = HmacOrigin("bank", b"a shared secret of the bank")


@pytest.fixture
def desk_options() -> dict[str, Any]:
    return {"origins": [BANK]}


async def test_a_text_turn_cannot_take_the_follow_up_turn_id_the_click_was_told(
    api: Api,
) -> None:
    api.script_rebooking()
    asked = await api.turn("Rebook the outbound flight")
    clicked = await api.post(answer_body(card_of(asked)), json_answer=True)
    (follow_up,) = clicked.json()["follow_up_turn_ids"]
    before = await api.rows()
    api.script_name()

    taken = await api.post({"text": "Name Grace Hopper", "turn_id": follow_up})

    assert taken.status_code == 422, taken.text
    assert taken.json()["code"] == codes.TURN_INVALID_INPUT
    assert await api.rows() == before
    desk = api.desk
    (claimed,) = await desk.stores.outbox.claim_due(desk.clock(), 10, "worker-1")
    await desk.runtime.outbox.dispatch(claimed.outbox_id, claimed.attempt_count)
    answer = await desk.runtime.load_turn(ACCOUNT, follow_up)
    assert desk.receipt_codes(answer) == ["trip.rebooked"]
    assert (await desk.stores.outbox.get(claimed.outbox_id)).status is OutboxStatus.COMPLETED


async def test_a_text_turn_cannot_take_the_turn_id_of_a_webhooks_event(api: Api) -> None:
    api.script_name("Ada Lovelace")
    await api.turn("Name Ada Lovelace")
    event = ServerEvent(
        account_id=ACCOUNT,
        conversation_id=CONVERSATION,
        origin="bank",
        idempotency_key="evt-1",
        workflow="trip",
        case_id="T-100",
        operation="trip.set_name",
        arguments={"name": "Grace Hopper"},
    )
    event_turn = event_turn_id(ACCOUNT, "bank", "evt-1")
    before = await api.rows()
    api.script_name()

    taken = await api.post({"text": "Name Grace Hopper", "turn_id": event_turn})

    assert taken.status_code == 422, taken.text
    assert taken.json()["code"] == codes.TURN_INVALID_INPUT
    assert await api.rows() == before
    sent = await api.client.post(
        "/events/bank",
        json=event.model_dump(mode="json"),
        headers={"x-turnframe-signature": BANK.sign(event.signing_bytes())},
    )
    assert sent.status_code == 200, sent.text
    assert sent.json()["turn"]["turn_id"] == event_turn
    turn = await api.desk.runtime.load_turn(ACCOUNT, event_turn)
    assert api.desk.receipt_codes(turn) == ["trip.name_set"]
