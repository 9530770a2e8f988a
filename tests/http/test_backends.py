"""The HTTP layer on every store backend (memory, SQLite, PostgreSQL): a turn streams and reads
back as stored, a card from elsewhere and another account's ids are refused with every table's
row count unchanged, and the feed delivers a turn stored while it is open."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from http_api import ACCOUNT, CONVERSATION, OTHER, Api, answer_body, card_of, served
from sse_reader import read_frames, read_frames_async

from turnframe_core import AssistantTurn, TurnCompleted, codes, parse_stream_event
from turnframe_test.backends import BACKENDS, StoreBackend


@pytest_asyncio.fixture(params=BACKENDS, name="store_backend")
async def _every_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoreBackend]:
    name: str = request.param
    server = request.getfixturevalue("turnframe_postgres_url") if name == "postgres" else None
    async with StoreBackend(name, tmp_path, server) as backend:
        yield backend


async def test_a_streamed_turn_reads_back_exactly_as_it_was_streamed(api: Api) -> None:
    api.script_name()

    streamed = await api.post({"text": "Name Grace Hopper"})
    completed = parse_stream_event(read_frames([streamed.content])[-1].data)
    read = await api.get(f"/conversations/{CONVERSATION}/turns")

    assert isinstance(completed, TurnCompleted)
    assert read.json()["turns"] == [completed.turn.model_dump(mode="json")]


async def test_refusals_write_no_row_in_any_table(api: Api) -> None:
    api.script_rebooking()
    asked = await api.turn("Rebook the outbound flight")
    before = await api.rows()
    assert before["tf_turn" if "tf_turn" in before else "user_turns"] == 1

    elsewhere = await api.post(answer_body(card_of(asked)), conversation="conv_2")
    foreign = await api.post(answer_body(card_of(asked)), account=OTHER)
    deep = await api.post(b"[" * 10_000 + b"]" * 10_000)
    unauthenticated = await api.post({"text": "Rebook"}, account=None)
    foreign_read = await api.get(f"/turns/{asked.turn_id}", account=OTHER)

    assert [r.status_code for r in (elsewhere, foreign, deep, unauthenticated)] == [
        404,
        404,
        422,
        401,
    ]
    assert elsewhere.json()["code"] == codes.INTERACTION_NOT_FOUND
    assert foreign_read.content == (await api.get("/turns/turn_never", account=OTHER)).content
    assert await api.rows() == before


async def test_the_feed_delivers_a_turn_stored_while_it_is_open(api: Api) -> None:
    api.script_name()
    await api.turn("Name Grace Hopper")
    async with (
        served(api.app) as client,
        client.stream(
            "GET", f"/conversations/{CONVERSATION}/feed", headers={"x-account": ACCOUNT}
        ) as feed,
    ):
        frames = read_frames_async(feed.aiter_text())
        assert (await anext(frames)).id == "1"
        api.script_name("Ada Lovelace")
        stored = await api.turn("Name Ada Lovelace")
        arrived = await anext(frames)

    assert arrived.id == "2"
    assert AssistantTurn.model_validate_json(arrived.data) == stored
