"""The chat example served by uvicorn and read with httpx on every backend: what the example adds
to the library's HTTP app (tests/http covers the routes themselves): each browser is an account
of its own, given with the page in an HttpOnly cookie; the travel desk streams a turn ending with
the stored turn; and a rebooking confirmed by a click is answered by the airline in a turn the
server writes, which the conversation's feed delivers."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sse_reader import Frame, read_frames_async

from examples.chat.app import ACCOUNT_COOKIE
from turnframe_core import StreamEvent, TurnCompleted, codes, parse_stream_event

pytestmark = pytest.mark.usefixtures("chat_server")


@contextlib.asynccontextmanager
async def _browser(url: str) -> AsyncIterator[httpx.AsyncClient]:
    """A client that opened the page first, as a browser does: it holds the account cookie."""
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        assert (await client.get("/")).status_code == 200
        yield client


@pytest.fixture
async def client(chat_server) -> AsyncIterator[httpx.AsyncClient]:
    async with _browser(chat_server.url) as client:
        yield client


def _account(client: httpx.AsyncClient) -> str:
    return client.cookies[ACCOUNT_COOKIE]


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
    return [parse_stream_event(frame.data) for frame in frames if frame.event != "follow_ups"]


def _completed(frames: list[Frame]) -> TurnCompleted:
    last = _events(frames)[-1]
    assert isinstance(last, TurnCompleted)
    return last


async def test_the_page_gives_each_browser_an_unguessable_account_in_an_httponly_cookie(
    chat_server,
):
    async with httpx.AsyncClient(base_url=chat_server.url) as first:
        served = await first.get("/")
        again = await first.get("/")
    async with httpx.AsyncClient(base_url=chat_server.url) as second:
        await second.get("/")

    cookie = served.headers["set-cookie"]
    assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
    assert "set-cookie" not in again.headers  # the browser keeps the account it was given
    account = first.cookies[ACCOUNT_COOKIE]
    assert account.startswith("acct_") and len(account) == len("acct_") + 32
    assert second.cookies[ACCOUNT_COOKIE] != account


@pytest.mark.parametrize(
    "cookies", [{}, {ACCOUNT_COOKIE: "acct_chat"}], ids=["no cookie", "not an issued id"]
)
async def test_an_api_call_without_an_account_the_page_gave_is_unauthenticated(
    chat_server, cookies
):
    async with httpx.AsyncClient(base_url=chat_server.url, cookies=cookies) as stranger:
        response = await stranger.post(
            "/api/conversations/conv_x1/turns", json={"text": "what is on file?"}
        )

    assert response.status_code == 401
    assert response.json()["code"] == codes.HTTP_UNAUTHENTICATED


async def test_another_browsers_conversation_does_not_exist_for_this_one(client, chat_server):
    await _post(client, "conv_b1", {"text": "what is on file?", "turn_id": "turn_b1"})
    async with _browser(chat_server.url) as other:
        listing = await other.get("/api/conversations/conv_b1/turns")
        turn = await other.get("/api/turns/turn_b1")

    assert (await client.get("/api/turns/turn_b1")).status_code == 200
    assert turn.status_code == 404
    assert listing.status_code == 404


async def test_a_turn_streams_the_desks_prose_as_tokens_ending_with_the_stored_turn(
    client, chat_server
):
    frames = await _post(client, "conv_a1", {"text": "rebook the outbound"}, mode="tokens")

    assert "content.block.delta" in [f.event for f in frames]  # the narrator's prose, as tokens
    completed = _completed(frames)
    runtime = chat_server.desk.runtime
    stored = chat_server.call(runtime.load_turn(_account(client), completed.turn_id))
    assert completed.turn == stored
    assert [b.kind for b in stored.blocks] == ["receipt", "transition", "interaction"]


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


async def test_a_confirmed_rebooking_is_answered_by_the_airline_in_a_turn_the_feed_delivers(
    client,
):
    asked = _completed(await _post(client, "conv_f1", {"text": "rebook the outbound"})).turn
    (card,) = [b for b in asked.blocks if b.kind == "interaction"]

    clicked = await client.post(
        "/api/conversations/conv_f1/turns",
        json={
            "interaction_response": {
                "interaction_id": card.interaction_id,
                "option_id": "opt_rebook",
                "expected_case_revision": card.case_revision,
            }
        },
        headers={"accept": "application/json"},
    )
    assert clicked.status_code == 200, clicked.text
    sent = clicked.json()
    (follow_up,) = sent["follow_up_turn_ids"]
    delivered = await _feed_until(client, "conv_f1", follow_up)

    assert [turn["turn_id"] for turn in delivered] == [
        asked.turn_id,
        sent["turn"]["turn_id"],
        follow_up,
    ]
    assert delivered[1] == sent["turn"]
    answer = delivered[2]
    assert [b["status_code"] for b in answer["blocks"] if b["kind"] == "receipt"] == [
        "trip.rebooked"
    ]
    listed = (await client.get("/api/conversations/conv_f1/turns")).json()["turns"]
    assert listed == delivered  # a reload shows what the feed delivered, in its order


async def _feed_until(client: httpx.AsyncClient, cid: str, turn_id: str) -> list[dict[str, Any]]:
    """The conversation's feed from its start, read until it delivers `turn_id` (the follow-up
    is written by the outbox worker after the click's reply: the feed waits for it)."""
    delivered: list[dict[str, Any]] = []
    async with client.stream("GET", f"/api/conversations/{cid}/feed") as response:
        assert response.status_code == 200
        async for frame in read_frames_async(response.aiter_text()):
            assert frame.event == "turn"
            assert frame.id == str(len(delivered) + 1)
            turn = json.loads(frame.data)
            delivered.append(turn)
            if turn["turn_id"] == turn_id:
                return delivered
    raise AssertionError("the feed ended")
