"""A turn's stream read from another process: after the turn ended, and while it is still
unfinished (a reader in another process follows the log while this one recovers the turn).
SQLite (a file both processes open) and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from turnframe_core import StreamEvent, TurnCompleted, TurnInput, parse_stream_event
from turnframe_store import SqlStores
from turnframe_test import DeskHarness, act, understanding
from turnframe_test.domains.travel import ProcessCrash
from turnframe_test.postgres import PrivateDatabase

# Another process: a runtime on the same database, reading one turn's stream after a sequence
# and printing each event's JSON on a line of its own.
READER = """
import asyncio, sys
from turnframe_test.demo import recovery_runtime

async def main(url, turn_id, after):
    runtime = await recovery_runtime(url)
    await runtime.stores.conversations.get_user_turn("acct_1", turn_id)
    print("ready", file=sys.stderr, flush=True)

    async def follow():
        async for event in runtime.resume_stream("acct_1", turn_id, after_sequence=int(after)):
            print(event.model_dump_json(), flush=True)

    following = asyncio.ensure_future(follow())
    while not following.done() and runtime.stream_followers("acct_1", turn_id) < 1:
        await asyncio.sleep(0.001)
    print("following", file=sys.stderr, flush=True)
    await following
    await runtime.stores.aclose()

asyncio.run(main(*sys.argv[1:]))
"""


@pytest.fixture(params=["sqlite", "postgres"])
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'stream.db'}"
        return
    server = request.getfixturevalue("postgres_url")
    async with PrivateDatabase(server) as db:
        yield db.url


async def _desk(url: str) -> DeskHarness:
    stores = await SqlStores.connect(url)
    await stores.migrate()
    desk = DeskHarness(stores=stores)
    desk.ready_trip()
    desk.interpreter.then(understanding(act("a1", "trip.set_name", "h1", "Grace", name="Grace")))
    return desk


def _turn() -> TurnInput:
    return TurnInput(
        account_id="acct_1", conversation_id="conv_1", text="Name Grace", turn_id="turn_p1"
    )


async def _reader(url: str, after: int) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        READER,
        url,
        "turn_p1",
        str(after),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _read_all(reader: asyncio.subprocess.Process) -> list[StreamEvent]:
    out, err = await asyncio.wait_for(reader.communicate(), 60)
    assert reader.returncode == 0, err.decode()
    return [parse_stream_event(line) for line in out.decode().splitlines() if line.strip()]


async def test_another_process_reads_a_finished_turns_stream_equal(database_url: str) -> None:
    desk = await _desk(database_url)
    try:
        events = [e async for e in desk.runtime.stream_turn(_turn())]
    finally:
        await desk.stores.aclose()
    assert isinstance(events[-1], TurnCompleted)
    for after in (0, 3):
        assert await _read_all(await _reader(database_url, after)) == events[after:]


@pytest.mark.slow
async def test_a_reader_in_another_process_follows_a_turn_this_one_recovers(
    database_url: str,
) -> None:
    desk = await _desk(database_url)
    try:
        desk.executor.arm_after_remote_request(ProcessCrash())
        seen: list[StreamEvent] = []
        with pytest.raises(ProcessCrash):
            async for event in desk.runtime.stream_turn(_turn()):
                seen.append(event)
        reader = await _reader(database_url, seen[-1].sequence)
        assert reader.stderr is not None
        ready = await asyncio.wait_for(reader.stderr.readline(), 30)
        assert ready.strip() == b"ready"  # the reader is up; the log it reads is unfinished
        following = await asyncio.wait_for(reader.stderr.readline(), 30)
        assert following.strip() == b"following"  # it follows the log, and has not ended
        assert reader.returncode is None
        await desk.runtime.recover_unfinished()
        rest = await _read_all(reader)
        turn = await desk.runtime.load_turn("acct_1", "turn_p1")
    finally:
        await desk.stores.aclose()
    assert isinstance(rest[-1], TurnCompleted) and rest[-1].turn == turn
    assert [e.sequence for e in seen + rest] == list(range(1, len(seen) + len(rest) + 1))
    assert json.loads(rest[-1].model_dump_json())["turn"]["turn_id"] == "turn_p1"
