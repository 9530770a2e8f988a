"""Helpers of the HTTP tests: `Api` drives `create_app` over a travel desk through httpx, and
`rows` counts what the stores hold (so a refusal is shown to write nothing)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request

from turnframe_core import AssistantTurn, InteractionBlock
from turnframe_runtime.http import Unauthenticated
from turnframe_store import MemoryStores, SqlStores, Stores
from turnframe_store.sql._backend import Statement
from turnframe_test import DeskHarness, act, understanding

ACCOUNT = "acct_1"
OTHER = "acct_2"
CONVERSATION = "conv_1"
NAME = "trip.set_name"
REBOOK = "trip.request_rebooking"


async def authenticate(request: Request) -> str | None:
    """The account the `x-account` header names (a test's stand-in for a session); `refuse`
    refuses with the typed error, no header with None."""
    account = request.headers.get("x-account")
    if account == "refuse":
        raise Unauthenticated()
    return account


def named(name: str = "Grace Hopper") -> Any:
    return understanding(act("a1", NAME, "h1", name, name=name))


@dataclass
class Api:
    desk: DeskHarness
    app: Starlette
    client: httpx.AsyncClient

    def script_name(self, name: str = "Grace Hopper") -> None:
        """The next words the desk reads set the trip's traveller name."""
        self.desk.interpreter.then(named(name))
        self.desk.clock.advance(1_000)

    def script_rebooking(self) -> None:
        """The next words ask to rebook the outbound flight (a confirmation card)."""
        self.desk.interpreter.then(understanding(act("a1", REBOOK, "h1", "Rebook", leg="outbound")))
        self.desk.clock.advance(1_000)

    async def post(
        self,
        body: Any,
        *,
        conversation: str = CONVERSATION,
        account: str | None = ACCOUNT,
        mode: str | None = None,
        json_answer: bool = False,
        **kwargs: Any,
    ) -> httpx.Response:
        headers = {**({} if account is None else {"x-account": account})}
        headers.update(kwargs.pop("headers", {}))
        if json_answer:
            headers["accept"] = "application/json"
        params = {"mode": mode} if mode is not None else {}
        if isinstance(body, bytes) or hasattr(body, "__aiter__"):
            kwargs["content"] = body  # raw bytes posted as JSON unless the test says otherwise
            headers.setdefault("content-type", "application/json")
        else:
            kwargs["json"] = body
        return await self.client.post(
            f"/conversations/{conversation}/turns", params=params, headers=headers, **kwargs
        )

    async def get(self, path: str, account: str | None = ACCOUNT, **kwargs: Any) -> httpx.Response:
        headers = {**({} if account is None else {"x-account": account})}
        headers.update(kwargs.pop("headers", {}))
        return await self.client.get(path, headers=headers, **kwargs)

    async def turn(self, text: str = "Name Grace Hopper", **body: Any) -> AssistantTurn:
        """A turn posted for its JSON answer: the stored turn (script the words first)."""
        answer = await self.post({"text": text, **body}, json_answer=True)
        assert answer.status_code == 200, answer.text
        return AssistantTurn.model_validate(answer.json()["turn"])

    async def rows(self) -> dict[str, int]:
        return await rows(self.desk.stores)


def card_of(turn: AssistantTurn) -> InteractionBlock:
    (card,) = [b for b in turn.blocks if isinstance(b, InteractionBlock)]
    return card


def answer_body(card: InteractionBlock, option_id: str = "opt_rebook") -> dict[str, Any]:
    return {
        "interaction_response": {
            "interaction_id": card.interaction_id,
            "option_id": option_id,
            "expected_case_revision": card.case_revision,
        }
    }


async def rows(stores: Stores) -> dict[str, int]:
    """How many rows each table holds (MemoryStores: each index), to prove nothing was written."""
    if isinstance(stores, MemoryStores):
        tables = vars(stores.engine.t)
        counts = {name: len(value) for name, value in tables.items() if isinstance(value, dict)}
        counts["event sequence"] = tables["last_sequence"]
        return counts
    assert isinstance(stores, SqlStores)
    schema = stores.config.schema
    if schema is None:
        listing = "SELECT name AS n FROM sqlite_master WHERE type = 'table'"
    else:
        listing = (
            f"SELECT table_name AS n FROM information_schema.tables WHERE table_schema = '{schema}'"
        )
    counts: dict[str, int] = {}
    async with stores.engine.backend.reading() as connection:
        found = await connection.fetch(Statement("t", listing, ("n",)), {})
        names = [row["n"] for row in found if row["n"].startswith("tf_")]
        for name in sorted(names):
            table = name if schema is None else f'"{schema}".{name}'
            count = Statement("c", f"SELECT count(*) AS n FROM {table}", ("n",))
            counts[name] = (await connection.fetch(count, {}))[0]["n"]
    return counts


@contextlib.asynccontextmanager
async def served(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    """`app` under uvicorn on 127.0.0.1 (a free port), on this test's event loop (where the
    desk's stores live), and a client of it; the server stops when the block ends."""
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.bind(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
    )
    serving = asyncio.ensure_future(server.serve(sockets=[listening]))
    try:
        for _ in range(500):
            if server.started or serving.done():
                break
            await asyncio.sleep(0.01)
        assert server.started, "uvicorn did not start"
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=20) as client:
            yield client
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 10)
        listening.close()
