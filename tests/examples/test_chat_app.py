"""The chat example's HTTP API, served by uvicorn and read with httpx on every backend: a turn
streams as server-sent events ending with the stored turn; a client that drops mid-stream and
reconnects with `Last-Event-ID` sees every event once, in order; refusals are 4xx JSON with
their stable codes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sse_reader import Frame, read_frames_async

from examples.chat.desk import CHAT_ACCOUNT
from turnframe_core import StreamEvent, TurnCompleted, codes, parse_stream_event

pytestmark = pytest.mark.usefixtures("chat_server")


@pytest.fixture
async def client(chat_server) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=chat_server.url, timeout=20) as client:
        yield client


async def _post(
    client: httpx.AsyncClient, cid: str, body: dict[str, object], mode: str = "whole"
) -> list[Frame]:
    async with client.stream(
        "POST", f"/api/conversations/{cid}/turns?mode={mode}", json=body
    ) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        return [frame async for frame in read_frames_async(response.aiter_text())]


def _events(frames: list[Frame]) -> list[StreamEvent]:
    return [parse_stream_event(frame.data) for frame in frames]


def _completed(frames: list[Frame]) -> TurnCompleted:
    last = _events(frames)[-1]
    assert isinstance(last, TurnCompleted)
    return last


async def test_a_turn_streams_as_frames_numbered_by_sequence_ending_with_the_stored_turn(
    client, chat_server
):
    frames = await _post(client, "conv_a1", {"text": "rebook the outbound"}, mode="tokens")

    events = _events(frames)
    assert [f.id for f in frames] == [str(n) for n in range(1, len(frames) + 1)]
    assert [f.event for f in frames] == [e.type for e in events]
    assert "content.block.delta" in [f.event for f in frames]  # the model's prose, as tokens
    completed = _completed(frames)
    stored = chat_server.call(chat_server.desk.runtime.load_turn(CHAT_ACCOUNT, completed.turn_id))
    assert completed.turn == stored
    assert [b.kind for b in stored.blocks] == ["receipt", "transition", "interaction"]


async def test_a_client_that_drops_mid_stream_and_reconnects_sees_every_event_once_in_order(
    client, chat_server
):
    turn_id = "turn_dropped1"
    body = {"text": "rebook the return", "turn_id": turn_id}
    first = await _post_until(
        client, "conv_a2/turns?mode=tokens", body, lambda seen: len(seen) == 2
    )
    async with client.stream(
        "GET", f"/api/turns/{turn_id}/events", headers={"Last-Event-ID": first[-1].id or ""}
    ) as response:
        assert response.status_code == 200
        rest = [frame async for frame in read_frames_async(response.aiter_text())]
    _assert_once_in_order(chat_server, turn_id, first, rest)


async def _post_until(
    client: httpx.AsyncClient, target: str, body: dict[str, object], stop: Any
) -> list[Frame]:
    """POST a turn and read its frames until `stop(frames so far)`: then the client goes away
    (the turn runs on)."""
    first: list[Frame] = []
    async with client.stream("POST", f"/api/conversations/{target}", json=body) as response:
        async for frame in read_frames_async(response.aiter_text()):
            first.append(frame)
            if stop(first):
                break
    return first


def _assert_once_in_order(chat_server, turn_id: str, first: list[Frame], rest: list[Frame]):
    """The frames before and after the reconnect: every event once, in order, the log's own,
    ending with the stored turn."""
    sequences = [int(f.id or 0) for f in first + rest]
    assert sequences == list(range(1, len(sequences) + 1))
    assert _events(first + rest) == chat_server.call(_resumed(chat_server, turn_id))
    stored = chat_server.call(chat_server.desk.runtime.load_turn(CHAT_ACCOUNT, turn_id))
    assert _completed(rest).turn == stored


async def test_a_client_that_reconnects_while_the_turn_runs_follows_it_to_its_end(
    client, chat_server
):
    """The turn is held in its command (the domain is slow): the reconnected client gets its
    response at once, waits, and receives the rest when the turn goes on."""
    runtime = chat_server.desk.runtime
    held = _Gated(runtime._executor)
    runtime._executor = held
    turn_id = "turn_held1"

    def executing(seen: list[Frame]) -> bool:  # the command is running (held)
        return seen[-1].event == "turn.step" and '"execute"' in seen[-1].data

    body = {"text": "rebook the return", "turn_id": turn_id}
    first = await _post_until(client, "conv_a5/turns", body, executing)
    assert held.entered.wait(10)
    async with client.stream(
        "GET", f"/api/turns/{turn_id}/events", headers={"Last-Event-ID": first[-1].id or ""}
    ) as response:
        assert response.status_code == 200  # answered while the turn is still held
        assert not held.gate.is_set()
        held.gate.set()
        rest = [frame async for frame in read_frames_async(response.aiter_text())]
    _assert_once_in_order(chat_server, turn_id, first, rest)


class _Gated:
    """The desk's executor, held at its first batch until `gate` is set (from the test's
    thread: the server runs on a loop of its own)."""

    def __init__(self, executor: object) -> None:
        self._executor = executor
        self.gate = threading.Event()
        self.entered = threading.Event()

    async def execute(self, batch: object) -> object:
        self.entered.set()
        await asyncio.to_thread(self.gate.wait, 20)
        return await self._executor.execute(batch)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._executor, name)


async def _resumed(chat_server, turn_id: str) -> list[StreamEvent]:
    return [e async for e in chat_server.desk.runtime.resume_stream(CHAT_ACCOUNT, turn_id, 0)]


async def test_resuming_with_the_after_parameter_equals_resuming_with_the_header(client):
    frames = await _post(client, "conv_a3", {"text": "what is on file?", "turn_id": "turn_q1"})

    by_query = await client.get("/api/turns/turn_q1/events", params={"after": "2"})
    by_header = await client.get("/api/turns/turn_q1/events", headers={"Last-Event-ID": "2"})

    assert by_query.status_code == by_header.status_code == 200
    assert by_query.text == by_header.text
    assert [f.data for f in frames[2:]] == [f.data async for f in _frames_of(by_query.text)]


async def _frames_of(text: str) -> AsyncIterator[Frame]:
    async def chunks() -> AsyncIterator[str]:
        yield text

    async for frame in read_frames_async(chunks()):
        yield frame


async def test_a_client_that_saw_the_last_event_is_told_there_is_nothing_more(client):
    frames = await _post(client, "conv_a4", {"text": "what is on file?", "turn_id": "turn_q2"})

    response = await client.get(
        "/api/turns/turn_q2/events", headers={"Last-Event-ID": frames[-1].id or ""}
    )

    assert response.status_code == 204


async def test_clicking_a_card_by_its_ids_streams_the_receipt(client):
    asked = _completed(await _post(client, "conv_a5", {"text": "cancel my trip"})).turn
    (card,) = [b for b in asked.blocks if b.kind == "interaction"]

    answered = await _post(
        client,
        "conv_a5",
        {
            "interaction_response": {
                "interaction_id": card.interaction_id,
                "option_id": "opt_confirm",
                "expected_case_revision": card.case_revision,
            }
        },
    )

    receipts = [b for b in _completed(answered).turn.blocks if b.kind == "receipt"]
    assert [r.status_code for r in receipts] == ["trip.withdrawn"]


async def test_the_conversation_reloads_exactly_as_the_turns_were_streamed(client):
    streamed = [
        _completed(await _post(client, "conv_a6", {"text": text})).turn
        for text in ("cancel my trip", "what is on file?")
    ]

    reloaded = (await client.get("/api/conversations/conv_a6")).json()

    assert reloaded["turns"] == [turn.model_dump(mode="json") for turn in streamed]
    assert [reloaded["inputs"][t.turn_id]["text"] for t in streamed] == [
        "cancel my trip",
        "what is on file?",
    ]


async def test_a_turn_id_reused_for_other_words_is_refused_with_its_code_before_any_event(
    client,
):
    await _post(client, "conv_a7", {"text": "what is on file?", "turn_id": "turn_once"})

    response = await client.post(
        "/api/conversations/conv_a7/turns", json={"text": "cancel my trip", "turn_id": "turn_once"}
    )

    assert response.status_code == 409
    assert response.json()["code"] == codes.RUNTIME_IDEMPOTENCY_KEY_REUSED


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"text": "hi", "interaction_response": {"interaction_id": "int_1"}},
        {"text": "hi", "turn_id": "not a turn id"},
    ],
)
async def test_a_malformed_turn_is_refused_as_invalid_input(client, body):
    response = await client.post("/api/conversations/conv_a8/turns", json=body)

    assert response.status_code == 422
    assert response.json()["code"] == codes.TURN_INVALID_INPUT


async def test_an_unknown_turn_cannot_be_resumed(client):
    response = await client.get("/api/turns/turn_never/events")

    assert response.status_code == 404
    assert response.json()["code"] == codes.STORE_NOT_FOUND


async def test_a_last_event_id_the_server_never_sent_is_refused_with_its_code(client):
    await _post(client, "conv_a9", {"text": "what is on file?", "turn_id": "turn_q3"})

    response = await client.get("/api/turns/turn_q3/events", headers={"Last-Event-ID": "x1"})

    assert response.status_code == 400
    assert response.json()["code"] == "turnframe.stream.invalid_last_event_id"
