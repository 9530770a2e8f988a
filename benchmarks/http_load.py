"""Hundreds of concurrent HTTP clients against ONE server process (uvicorn, the chat example's app:
the library's HTTP app over the travel desk) on PostgreSQL: feed followers (one SSE stream each,
spread over the conversations) and turn streams (a POSTed turn answered as SSE), against a bare
Starlette SSE endpoint in a second process measured in the same run with the same clients and
the same payloads (a stored turn's JSON, handed to the followers by an in-memory fan-out).

Reported, for each server:
- connections used: PostgreSQL sessions of the server (pg_stat_activity by application_name),
  with the followers connected and idle, and the most seen while turns run;
- memory per client: the server's RSS (/proc/<pid>/status) before and after connecting the
  followers, divided by their number;
- delivery latency p50/p99: from a turn's POST being sent to each follower of its conversation
  receiving it from the feed (every delivery of every round), and the POST's own reply time;
- the ratio library / bare for each figure.
Then the followers' bound: one conversation is followed up to
`RuntimeConfig.feed_followers_per_conversation` and one more is refused with 429 and its code.

Everything is bounded: a fixed number of rounds, each with a deadline, and a run timeout; the
database schema is dropped and both servers stopped at the end.

Run: `.venv/bin/python benchmarks/http_load.py [--followers 300] [--conversations 50]
[--rounds 5]` (PostgreSQL at TURNFRAME_TEST_DATABASE_URL, default 127.0.0.1:5432/test).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `examples` is not installed: it is the repository's
    sys.path.insert(0, str(ROOT))

SERVER = os.environ.get(
    "TURNFRAME_TEST_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
ACCOUNT = "acct_" + "b" * 32  # every client is one browser of one account
QUESTION = "what is on file?"
_TURN_ID = re.compile(r'"turn_id":\s*"([^"]+)"')
_TURN_ID_BYTES = re.compile(rb'"turn_id":\s*"(turn_[0-9A-Za-z_-]+)"')


# --- the servers (each in a process of its own) ------------------------------------------------


def serve_library(port: int, url: str, schema: str) -> None:
    """The chat example's app on PostgreSQL (schema `schema`), every block server copy."""
    import uvicorn

    from examples.chat.app import create_app
    from turnframe_store import SqlConfig, SqlStores, Stores

    async def opened() -> Stores:
        stores = await SqlStores.connect(url, SqlConfig(schema=schema))
        await stores.migrate()
        return stores

    app = create_app(opened, narrate=False)
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        backlog=4096,
        timeout_graceful_shutdown=2,
    )


def serve_bare(port: int) -> None:
    """A bare Starlette SSE endpoint: followers of a conversation get what is POSTed to it."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    followers: dict[str, set[asyncio.Queue[bytes]]] = {}
    sequences: dict[str, int] = {}

    async def feed(request: Request) -> Response:
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        cid = request.path_params["cid"]
        followers.setdefault(cid, set()).add(queue)

        async def frames() -> AsyncIterator[bytes]:
            try:
                yield b": hello\n\n"
                while True:
                    yield await queue.get()
            finally:
                followers[cid].discard(queue)

        return StreamingResponse(frames(), media_type="text/event-stream")

    async def post(request: Request) -> Response:
        cid = request.path_params["cid"]
        payload = await request.body()
        sequences[cid] = sequences.get(cid, 0) + 1
        frame = b"event: turn\nid: %d\ndata: %s\n\n" % (sequences[cid], payload)
        for queue in followers.get(cid, ()):
            queue.put_nowait(frame)
        return JSONResponse({"ok": True})

    app = Starlette(
        routes=[
            Route("/api/conversations/{cid}/feed", feed),
            Route("/api/conversations/{cid}/turns", post, methods=["POST"]),
        ]
    )
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        backlog=4096,
        timeout_graceful_shutdown=2,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Server:
    name: str
    process: subprocess.Popen[bytes]
    url: str
    application_name: str | None = None

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


async def start(name: str, *arguments: str, application_name: str | None = None) -> Server:
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if application_name:
        env["PGAPPNAME"] = application_name  # libpq names every session of the server so
    process = subprocess.Popen(
        [sys.executable, __file__, name, "--port", str(port), *arguments], env=env
    )
    server = Server(name, process, f"http://127.0.0.1:{port}", application_name)
    async with httpx.AsyncClient() as client:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise SystemExit(f"the {name} server exited ({process.returncode})")
            with contextlib.suppress(httpx.TransportError):
                await client.get(server.url + "/nothing")
                return server
            if time.monotonic() > deadline:
                server.stop()
                raise SystemExit(f"the {name} server did not start")
            await asyncio.sleep(0.1)


# --- the clients ---------------------------------------------------------------------------------


@dataclass
class Follower:
    """One feed client: when it received each turn (by id)."""

    cid: str
    received: dict[str, float] = field(default_factory=dict)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    status: int | None = None


async def follow(base: str, follower: Follower) -> None:
    """Read the feed on a bare socket (HTTP/1.1 by hand): the client's own cost per delivery is
    a regex over the bytes read, so the latencies are the server's, not a client library's."""
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(
            (
                f"GET /api/conversations/{follower.cid}/feed HTTP/1.1\r\nhost: {host}\r\n"
                f"accept: text/event-stream\r\ncookie: turnframe_chat_account={ACCOUNT}\r\n\r\n"
            ).encode()
        )
        head = await reader.readuntil(b"\r\n\r\n")
        follower.status = int(head.split(b" ", 2)[1])
        if follower.status != 200:
            follower.ready.set()
            return
        tail = b""
        while chunk := await reader.read(65536):
            now = time.perf_counter()
            buffer = tail + chunk
            for found in _TURN_ID_BYTES.finditer(buffer):
                follower.received.setdefault(found.group(1).decode(), now)
            tail = buffer[-120:]  # a turn id split across two reads is found in the next
            follower.ready.set()
    finally:
        writer.close()


async def post_turn(base: str, cid: str, body: bytes, library: bool) -> tuple[str, float, float]:
    """(turn id, when the POST was sent, when its reply ended), on a bare socket too."""
    turn_id = "turn_" + secrets.token_hex(16)
    if library:
        payload = json.dumps({"text": QUESTION, "turn_id": turn_id}).encode()
    else:  # the same stored turn's JSON, under a fresh id
        payload = _TURN_ID.sub(f'"turn_id":"{turn_id}"', body.decode(), count=1).encode()
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    request = (
        f"POST /api/conversations/{cid}/turns HTTP/1.1\r\nhost: {host}\r\n"
        f"content-type: application/json\r\naccept: text/event-stream\r\n"
        f"cookie: turnframe_chat_account={ACCOUNT}\r\ncontent-length: {len(payload)}\r\n"
        "connection: close\r\n\r\n"
    ).encode()
    try:
        sent = time.perf_counter()
        writer.write(request + payload)
        answer = await reader.read()  # to the end: the server closes after its reply
    finally:
        writer.close()
    if not answer.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"a turn was refused: {answer[:300]!r}")
    return turn_id, sent, time.perf_counter()


async def connections(server: Server) -> int:
    import psycopg

    from turnframe_store.sql.url import parse_url

    async with await psycopg.AsyncConnection.connect(parse_url(SERVER)[1], autocommit=True) as c:
        cursor = await c.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
            (server.application_name,),
        )
        row = await cursor.fetchone()
        return int(row[0]) if row else 0


@dataclass
class Figures:
    rss_before_kib: int = 0
    rss_after_kib: int = 0
    sessions_before: int = 0
    idle_connections: int = 0
    peak_connections: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    replies_ms: list[float] = field(default_factory=list)
    after_reply_ms: list[float] = field(default_factory=list)
    missed: int = 0
    followers: int = 0

    def per_client_kib(self) -> float:
        return (self.rss_after_kib - self.rss_before_kib) / max(1, self.followers)


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def measure(
    server: Server,
    *,
    library: bool,
    conversations: list[str],
    followers: int,
    rounds: int,
    round_timeout_s: float,
    streams: int,
    payload: bytes,
) -> Figures:
    figures = Figures(followers=followers)
    if library:  # each conversation exists (and has its trip) before it is followed
        await asyncio.gather(*(post_turn(server.url, cid, payload, True) for cid in conversations))
    await asyncio.sleep(1)
    figures.rss_before_kib = server.rss_kib()
    if library:
        figures.sessions_before = await connections(server)
    crowd = [Follower(conversations[n % len(conversations)]) for n in range(followers)]
    tasks = [asyncio.create_task(follow(server.url, f)) for f in crowd]
    try:
        await asyncio.wait_for(asyncio.gather(*(f.ready.wait() for f in crowd)), 60)
        refused = [f.status for f in crowd if f.status != 200]
        if refused:
            raise SystemExit(f"{len(refused)} followers were refused: {refused[:3]}")
        await asyncio.sleep(1)
        figures.rss_after_kib = server.rss_kib()
        if library:
            figures.idle_connections = await connections(server)
        for _ in range(rounds):
            await _round(
                server, crowd, conversations, library, payload, figures, round_timeout_s, streams
            )
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return figures


async def _round(
    server: Server,
    crowd: list[Follower],
    conversations: list[str],
    library: bool,
    payload: bytes,
    figures: Figures,
    timeout_s: float,
    streams: int,
) -> None:
    sampling = True

    async def sample() -> None:
        while sampling and library:
            figures.peak_connections = max(figures.peak_connections, await connections(server))
            await asyncio.sleep(0.05)

    sampler = asyncio.create_task(sample())
    talking = conversations[:streams]
    posted = await asyncio.gather(
        *(post_turn(server.url, cid, payload, library) for cid in talking)
    )
    by_cid = dict(zip(talking, posted, strict=True))
    crowd = [f for f in crowd if f.cid in by_cid]
    figures.replies_ms += [(done - sent) * 1000 for _, sent, done in posted]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(by_cid[f.cid][0] in f.received for f in crowd):
            break
        await asyncio.sleep(0.02)
    sampling = False
    await sampler
    for follower in crowd:
        turn_id, sent, replied = by_cid[follower.cid]
        if turn_id in follower.received:
            figures.latencies_ms.append((follower.received[turn_id] - sent) * 1000)
            figures.after_reply_ms.append((follower.received[turn_id] - replied) * 1000)
        else:
            figures.missed += 1


async def refusal(server: Server, cid: str, bound: int) -> tuple[int, int, str]:
    """Follow `cid` up to the bound, then once more: how many were accepted, and the last
    one's status and code."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(30, read=None)) as client:
        client.cookies.update({"turnframe_chat_account": ACCOUNT})
        crowd = [Follower(cid) for _ in range(bound)]
        tasks = [asyncio.create_task(follow(server.url, f)) for f in crowd]
        try:
            await asyncio.wait_for(asyncio.gather(*(f.ready.wait() for f in crowd)), 60)
            response = await client.get(f"{server.url}/api/conversations/{cid}/feed")
            code = str(response.json().get("code")) if response.status_code != 200 else "-"
            return sum(f.status == 200 for f in crowd), response.status_code, code
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def stored_turn_payload(server: Server, cid: str) -> bytes:
    async with httpx.AsyncClient(cookies={"turnframe_chat_account": ACCOUNT}) as client:
        listed = (await client.get(f"{server.url}/api/conversations/{cid}/turns")).json()
        return json.dumps(listed["turns"][-1], separators=(",", ":")).encode()


async def drop_schema(schema: str) -> None:
    import psycopg

    from turnframe_store.sql.url import parse_url

    async with await psycopg.AsyncConnection.connect(parse_url(SERVER)[1], autocommit=True) as c:
        await c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _row(name: str, library: float, bare: float, unit: str) -> str:
    ratio = library / bare if bare else float("nan")
    return f"{name:<34} {library:10.1f} {bare:10.1f}  {unit:<6} ratio {ratio:6.2f}"


async def run(args: argparse.Namespace) -> None:
    schema = f"tf_bench_{uuid.uuid4().hex[:10]}"
    conversations = [f"conv_load{n:03d}" for n in range(args.conversations)]
    library = await start(
        "serve-library", "--url", SERVER, "--schema", schema, application_name=schema
    )
    bare: Server | None = None
    try:
        lib = await measure(
            library,
            library=True,
            conversations=conversations,
            followers=args.followers,
            rounds=args.rounds,
            round_timeout_s=args.round_timeout,
            streams=min(args.streams, len(conversations)),
            payload=b"",
        )
        payload = await stored_turn_payload(library, conversations[0])
        per_conversation = -(-args.followers // len(conversations))
        accepted, status, code = await refusal(library, conversations[0], args.bound)
        library.stop()
        bare = await start("serve-bare")
        base = await measure(
            bare,
            library=False,
            conversations=conversations,
            followers=args.followers,
            rounds=args.rounds,
            round_timeout_s=args.round_timeout,
            streams=min(args.streams, len(conversations)),
            payload=payload,
        )
    finally:
        library.stop()
        if bare is not None:
            bare.stop()
        await drop_schema(schema)

    print(
        f"{args.followers} feed followers over {len(conversations)} conversations "
        f"(~{per_conversation} each), {min(args.streams, len(conversations))} turn streams per "
        "round, "
        f"{args.rounds} rounds; one uvicorn process; payload {len(payload)} bytes"
    )
    print(f"{'':<34} {'library':>10} {'bare':>10}")
    print(f"{'PostgreSQL sessions, no followers':<34} {lib.sessions_before:10d} {'-':>10}")
    print(f"{'PostgreSQL sessions, followers idle':<34} {lib.idle_connections:10d} {'-':>10}")
    print(f"{'PostgreSQL sessions, turns running':<34} {lib.peak_connections:10d} {'-':>10}")
    print(
        _row(
            "server RSS before followers",
            lib.rss_before_kib / 1024,
            base.rss_before_kib / 1024,
            "MiB",
        )
    )
    print(
        _row(
            "server RSS with followers", lib.rss_after_kib / 1024, base.rss_after_kib / 1024, "MiB"
        )
    )
    print(_row("memory per follower", lib.per_client_kib(), base.per_client_kib(), "KiB"))
    for q, name in ((0.5, "p50"), (0.99, "p99")):
        print(
            _row(
                f"POST -> follower latency {name}",
                _pct(lib.latencies_ms, q),
                _pct(base.latencies_ms, q),
                "ms",
            )
        )
        print(_row(f"POST reply {name}", _pct(lib.replies_ms, q), _pct(base.replies_ms, q), "ms"))

    print(
        f"library: a follower has the turn {_pct(lib.after_reply_ms, 0.5):+.0f} ms (p50) / "
        f"{_pct(lib.after_reply_ms, 0.99):+.0f} ms (p99) after the POST's own reply ended "
        "(negative: before)"
    )
    print(
        f"deliveries {len(lib.latencies_ms)} / {len(base.latencies_ms)}, "
        f"missed {lib.missed} / {base.missed} (library / bare)"
    )
    print(
        f"one conversation followed {accepted} times (bound {args.bound}); "
        f"follower {args.bound + 1}: {status} {code}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    library = sub.add_parser("serve-library")
    library.add_argument("--port", type=int, required=True)
    library.add_argument("--url", required=True)
    library.add_argument("--schema", required=True)
    bare = sub.add_parser("serve-bare")
    bare.add_argument("--port", type=int, required=True)
    parser.add_argument("--followers", type=int, default=300)
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--streams",
        type=int,
        default=50,
        help="turns POSTed at once per round (one per conversation)",
    )
    parser.add_argument("--round-timeout", type=float, default=30.0)
    parser.add_argument("--bound", type=int, default=64, help="followers per conversation")
    parser.add_argument("--timeout", type=float, default=600.0, help="the whole run, seconds")
    args = parser.parse_args()
    if args.command == "serve-library":
        serve_library(args.port, args.url, args.schema)
    elif args.command == "serve-bare":
        serve_bare(args.port)
    else:
        asyncio.run(asyncio.wait_for(run(args), args.timeout))


if __name__ == "__main__":
    main()
