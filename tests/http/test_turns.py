"""Posting a turn: streamed as server-sent events numbered by sequence and ending with the
stored turn, or answered as JSON; the account comes from `authenticate`, a turn id the server
assigns is random, and a card is answered by its ids."""

from __future__ import annotations

import re

import httpx
from http_api import (
    ACCOUNT,
    CONVERSATION,
    REBOOK,
    Api,
    answer_body,
    authenticate,
    card_of,
    named,
    rows,
)
from sse_reader import read_frames

from turnframe_core import AssistantTurn, TurnCompleted, codes, parse_stream_event
from turnframe_core.ids import is_derived_id
from turnframe_runtime import follow_up_turn_id
from turnframe_runtime.http import create_app
from turnframe_test import act, understanding


async def test_a_turn_streams_as_frames_numbered_by_sequence_ending_with_the_stored_turn(
    api: Api,
) -> None:
    api.script_name()

    response = await api.post({"text": "Name Grace Hopper"})

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-store"
    frames = read_frames([response.content])
    events = [parse_stream_event(frame.data) for frame in frames]
    assert [frame.id for frame in frames] == [str(n) for n in range(1, len(frames) + 1)]
    assert [frame.event for frame in frames] == [event.type for event in events]
    assert frames[0].retry is not None
    completed = events[-1]
    assert isinstance(completed, TurnCompleted)
    assert response.headers["x-turn-id"] == completed.turn_id
    assert completed.turn == await api.desk.runtime.load_turn(ACCOUNT, completed.turn_id)


async def test_a_turn_id_the_server_assigns_is_160_random_bits_in_the_turn_id_format(
    api: Api,
) -> None:
    ids = []
    for name in ("Grace Hopper", "Ada Lovelace"):
        api.script_name(name)
        ids.append((await api.post({"text": f"Name {name}"})).headers["x-turn-id"])

    for turn_id in ids:
        assert re.fullmatch(r"turn_[a-z2-7]{32}", turn_id)  # base32 of 20 bytes from `secrets`
        assert not is_derived_id(turn_id)  # never one the server derives for its own turns
    assert ids[0] != ids[1]
    assert ids[0][5:15] != ids[1][5:15]  # no shared time prefix, unlike a ULID


async def test_a_client_turn_id_is_kept_and_a_retry_answers_the_same_stream(api: Api) -> None:
    api.script_name()
    body = {"text": "Name Grace Hopper", "turn_id": "turn_client1"}

    first = await api.post(body)
    again = await api.post(body)

    assert first.headers["x-turn-id"] == again.headers["x-turn-id"] == "turn_client1"
    assert first.content == again.content
    assert api.desk.interpreter.calls == 1


async def test_with_accept_json_the_answer_is_the_stored_turn_and_its_follow_up_ids(
    api: Api,
) -> None:
    api.script_name()

    response = await api.post({"text": "Name Grace Hopper"}, json_answer=True)

    assert response.status_code == 200
    body = response.json()
    turn = AssistantTurn.model_validate(body["turn"])
    assert body["turn"] == (await api.desk.runtime.load_turn(ACCOUNT, turn.turn_id)).model_dump(
        mode="json"
    )
    assert body["follow_up_turn_ids"] == []
    assert response.headers["x-turn-id"] == turn.turn_id


async def test_tokens_mode_streams_the_same_stored_turn(api: Api) -> None:
    api.script_name()

    response = await api.post({"text": "Name Grace Hopper"}, mode="tokens")

    events = [parse_stream_event(f.data) for f in read_frames([response.content])]
    assert events[0].mode == "tokens"  # type: ignore[union-attr]
    assert isinstance(events[-1], TurnCompleted)


async def test_clicking_a_card_by_its_ids_answers_with_the_receipt(api: Api) -> None:
    api.script_rebooking()
    asked = await api.turn("Rebook the outbound flight")

    answered = await api.post(answer_body(card_of(asked)), json_answer=True)

    assert answered.status_code == 200, answered.text
    turn = AssistantTurn.model_validate(answered.json()["turn"])
    assert api.desk.receipt_codes(turn) == ["trip.rebooking_sent"]
    (entry,) = await api.desk.journal(turn)
    (row,) = await api.desk.stores.outbox.list_for_command(entry.command_id)
    # the turn the outbox will write when the airline answers
    assert answered.json()["follow_up_turn_ids"] == [
        follow_up_turn_id(ACCOUNT, row.outbox_id, "answer")
    ]


async def test_the_conversation_hook_is_awaited_with_the_account_before_the_turn_runs(
    make_desk,
) -> None:
    desk = await make_desk()
    opened: list[tuple[str, str, int]] = []

    async def on_conversation(account_id: str, conversation_id: str) -> None:
        turns = await desk.stores.conversations.list_turns(account_id, conversation_id)
        opened.append((account_id, conversation_id, len(turns)))
        desk.ready_trip()  # the trip the turn acts on exists once the hook ran

    app = create_app(desk.runtime, authenticate=authenticate, on_conversation=on_conversation)
    desk.interpreter.then(named())
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as client:
        response = await client.post(
            f"/conversations/{CONVERSATION}/turns",
            json={"text": "Name Grace Hopper"},
            headers={"x-account": ACCOUNT, "accept": "application/json"},
        )

    assert response.status_code == 200, response.text
    assert opened == [(ACCOUNT, CONVERSATION, 0)]
    turn = AssistantTurn.model_validate(response.json()["turn"])
    assert desk.receipt_codes(turn) == ["trip.name_set"]


async def test_a_click_calls_no_conversation_hook_and_one_on_a_card_from_elsewhere_writes_nothing(
    make_desk,
) -> None:
    desk = await make_desk()
    desk.ready_trip()
    opened: list[tuple[str, str]] = []

    async def on_conversation(account_id: str, conversation_id: str) -> None:
        opened.append((account_id, conversation_id))

    app = create_app(desk.runtime, authenticate=authenticate, on_conversation=on_conversation)
    desk.interpreter.then(understanding(act("a1", REBOOK, "h1", "Rebook", leg="outbound")))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://t",
        headers={"x-account": ACCOUNT, "accept": "application/json"},
    ) as client:
        asked = await client.post(
            f"/conversations/{CONVERSATION}/turns", json={"text": "Rebook the outbound flight"}
        )
        card = card_of(AssistantTurn.model_validate(asked.json()["turn"]))
        before = await rows(desk.stores)

        elsewhere = await client.post("/conversations/conv_2/turns", json=answer_body(card))

        assert elsewhere.status_code == 404
        assert elsewhere.json()["code"] == codes.INTERACTION_NOT_FOUND
        assert await rows(desk.stores) == before
        clicked = await client.post(f"/conversations/{CONVERSATION}/turns", json=answer_body(card))
        assert clicked.status_code == 200, clicked.text

    assert opened == [(ACCOUNT, CONVERSATION)]  # the text turn's only


async def test_a_bad_mode_is_a_malformed_request(api: Api) -> None:
    response = await api.post({"text": "hi"}, mode="sentences")

    assert response.status_code == 400
    assert response.json()["code"] == codes.HTTP_MALFORMED_REQUEST
