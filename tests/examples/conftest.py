"""The chat example served for real: uvicorn on 127.0.0.1 (a free port) in a background thread,
on stores of each backend (memory, SQLite, PostgreSQL) opened on the server's own event loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from examples.chat.background import BackgroundServer
from examples.chat.desk import Database
from turnframe_store import MemoryStores, SqlStores, Stores
from turnframe_test.backends import Databases


def serve(database: Database, **options: Any) -> Iterator[BackgroundServer]:
    server = BackgroundServer(database, **options).start()
    try:
        yield server
    finally:
        server.stop()


def _memory() -> Database:
    async def opened() -> Stores:
        return MemoryStores()

    return opened


def _postgres(databases: Databases) -> Database:
    database = databases.new()

    async def opened() -> Stores:  # on the server's loop; the app closes them
        stores = await SqlStores.connect(database.url, database.config)
        await stores.migrate()
        return stores

    return opened


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def chat_server(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[BackgroundServer]:
    """The chat app on fresh stores of each backend."""
    databases = None
    if request.param == "memory":
        database = _memory()
    elif request.param == "sqlite":
        database = f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}"
    else:
        databases = Databases("postgres", tmp_path, request.getfixturevalue("postgres_url"))
        database = _postgres(databases)
    server = await asyncio.to_thread(lambda: BackgroundServer(database).start())
    try:
        yield server
    finally:
        await asyncio.to_thread(server.stop)
        if databases is not None:
            await databases.close()  # drops the schema


@pytest.fixture
def sqlite_chat_server(tmp_path: Path) -> Iterator[BackgroundServer]:
    """The chat app on a SQLite file, as `python -m examples.chat` runs it."""
    yield from serve(f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}")
