"""The SQL fixtures remove what they made even when closing a store fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from services import Databases

from turnframe_store.sql.url import parse_url


async def test_schemas_are_dropped_even_when_a_store_fails_to_close(
    postgres_url: str, tmp_path: Path
) -> None:
    made = Databases("postgres", tmp_path, postgres_url)
    failing = await made.migrated()
    closing = failing.aclose
    second = await made.migrated()

    async def broken_close() -> None:
        await closing()
        raise RuntimeError("close failed")

    failing.aclose = broken_close  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="close failed"):
        await made.close()

    async with await psycopg.AsyncConnection.connect(
        parse_url(postgres_url)[1], autocommit=True
    ) as connection:
        cursor = await connection.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = ANY(%s)",
            (made.schemas,),
        )
        row = await cursor.fetchone()
    assert row == (0,)
    backend: Any = second.engine.backend
    assert backend.pool.closed  # the store after the failing one was closed too
