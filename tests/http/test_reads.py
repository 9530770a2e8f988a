"""Reading back over HTTP: a turn's events resumed after the last one a client saw (by
`Last-Event-ID` or `?after=`), 204 once it saw the end; the stored turn; a conversation's turns
oldest first with what the user sent for each."""

from __future__ import annotations

import json

import pytest
from http_api import ACCOUNT, CONVERSATION, Api, answer_body, card_of
from sse_reader import read_frames

from turnframe_core import AssistantTurn, TurnInput, codes
from turnframe_test.domains.travel import ProcessCrash


async def _streamed(api: Api, turn_id: str = "turn_r1") -> list:  # type: ignore[type-arg]
    api.script_name()
    response = await api.post({"text": "Name Grace Hopper", "turn_id": turn_id})
    assert response.status_code == 200
    return read_frames([response.content])


async def test_resuming_after_a_sequence_gives_the_rest_of_the_stream_exactly(api: Api) -> None:
    frames = await _streamed(api)

    resumed = await api.get("/turns/turn_r1/events", headers={"Last-Event-ID": "2"})

    assert resumed.status_code == 200
    assert resumed.headers["x-turn-id"] == "turn_r1"
    rest = read_frames([resumed.content])
    assert [(f.id, f.event, f.data) for f in rest] == [(f.id, f.event, f.data) for f in frames[2:]]


async def test_resuming_with_the_after_parameter_equals_resuming_with_the_header(
    api: Api,
) -> None:
    await _streamed(api)

    by_query = await api.get("/turns/turn_r1/events", params={"after": "1"})
    by_header = await api.get("/turns/turn_r1/events", headers={"Last-Event-ID": "1"})

    assert by_query.status_code == by_header.status_code == 200
    assert by_query.content == by_header.content


async def test_a_client_that_saw_the_last_event_is_told_there_is_nothing_more(api: Api) -> None:
    frames = await _streamed(api)

    response = await api.get("/turns/turn_r1/events", headers={"Last-Event-ID": frames[-1].id})

    assert response.status_code == 204
    assert response.content == b""


async def test_a_malformed_last_event_id_is_refused_rather_than_replaying_from_the_start(
    api: Api,
) -> None:
    await _streamed(api)

    for bad in ("-1", "1.5", "abc", "٣".encode()):
        response = await api.get("/turns/turn_r1/events", headers={"Last-Event-ID": bad})
        assert response.status_code == 400
        assert response.json()["code"] == codes.STREAM_INVALID_LAST_EVENT_ID
    response = await api.get("/turns/turn_r1/events", params={"after": "x"})
    assert response.status_code == 400


async def test_the_stored_turn_reads_as_it_was_answered(api: Api) -> None:
    api.script_name()
    posted = await api.post({"text": "Name Grace Hopper"}, json_answer=True)

    read = await api.get(f"/turns/{posted.json()['turn']['turn_id']}")

    assert read.status_code == 200
    assert read.json() == posted.json()


async def test_a_conversation_reads_oldest_first_with_what_the_user_sent(api: Api) -> None:
    turns: list[AssistantTurn] = []
    for name in ("Grace Hopper", "Ada Lovelace"):
        api.script_name(name)
        turns.append(await api.turn(f"Name {name}"))

    read = await api.get(f"/conversations/{CONVERSATION}/turns")

    assert read.status_code == 200
    body = read.json()
    assert body["conversation_id"] == CONVERSATION
    assert body["turns"] == [turn.model_dump(mode="json") for turn in turns]
    assert [body["inputs"][t.turn_id]["text"] for t in turns] == [
        "Name Grace Hopper",
        "Name Ada Lovelace",
    ]
    last = await api.get(f"/conversations/{CONVERSATION}/turns", params={"limit": "1"})
    assert last.json()["turns"] == [turns[-1].model_dump(mode="json")]


async def test_a_limit_that_is_not_a_positive_number_is_a_malformed_request(api: Api) -> None:
    for bad in ("0", "-3", "ten", "1e3"):
        response = await api.get(f"/conversations/{CONVERSATION}/turns", params={"limit": bad})
        assert response.status_code == 400
        assert response.json()["code"] == codes.HTTP_MALFORMED_REQUEST


async def test_a_conversation_nobody_wrote_in_is_not_found(api: Api) -> None:
    response = await api.get("/conversations/conv_never/turns")

    assert response.status_code == 404
    assert response.json()["code"] == codes.STORE_NOT_FOUND


async def test_a_turn_a_crash_left_without_its_reply_is_in_progress(api: Api) -> None:
    api.script_name()
    api.desk.executor.arm_after_remote_request(ProcessCrash())
    with pytest.raises(ProcessCrash):
        await api.desk.runtime.handle_turn(
            TurnInput(
                account_id=ACCOUNT,
                conversation_id=CONVERSATION,
                text="Name Grace Hopper",
                turn_id="turn_c1",
            )
        )

    response = await api.get("/turns/turn_c1")

    assert response.status_code == 409
    assert response.json()["code"] == codes.RUNTIME_TURN_IN_PROGRESS


async def test_a_resumed_stream_of_a_click_names_its_follow_up_after_the_terminal_event(
    api: Api,
) -> None:
    api.script_rebooking()
    asked = await api.turn("Rebook the outbound flight")
    clicked = await api.post(answer_body(card_of(asked)))
    turn_id = clicked.headers["x-turn-id"]

    resumed = await api.get(f"/turns/{turn_id}/events", params={"after": "0"})

    assert resumed.content == clicked.content
    last = read_frames([resumed.content])[-1]
    assert (last.event, last.id) == ("follow_ups", None)
    assert (
        json.loads(last.data)["turn_ids"]
        == (await api.get(f"/turns/{turn_id}")).json()["follow_up_turn_ids"]
    )
