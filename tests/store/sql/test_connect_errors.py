"""`SqlStores.connect` refuses what cannot work with a typed error that says what to do: a URL or
SQLite path that names no database file, or PostgreSQL without the `postgres` extra."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from turnframe_core import codes
from turnframe_core.errors import TurnframeError
from turnframe_store import InvalidDatabaseUrl, MissingExtra, SqlStores


@pytest.fixture
def without_psycopg(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as if the `postgres` extra were not installed."""
    for name in list(sys.modules):
        if name.split(".")[0] in ("psycopg", "psycopg_pool", "psycopg_binary"):
            monkeypatch.delitem(sys.modules, name)
    for name in ("psycopg", "psycopg_pool"):
        monkeypatch.setitem(sys.modules, name, None)  # `import psycopg` raises ImportError
    monkeypatch.delitem(sys.modules, "turnframe_store.sql._postgres", raising=False)


@pytest.mark.usefixtures("without_psycopg")
async def test_postgresql_without_the_extra_names_the_extra_to_install() -> None:
    with pytest.raises(MissingExtra) as raised:
        await SqlStores.connect("postgresql+psycopg://user:secret@127.0.0.1:5432/db")

    assert isinstance(raised.value, TurnframeError) and isinstance(raised.value, ImportError)
    assert raised.value.code == codes.STORE_MISSING_EXTRA
    assert "pip install 'turnframe[postgres]'" in str(raised.value)
    assert "secret" not in str(raised.value)


@pytest.mark.parametrize(
    "url", ["mysql://root@localhost/db", "postgresql+asyncpg://u@h/db", "not a url"]
)
async def test_an_unsupported_database_url_is_an_invalid_database_url(url: str) -> None:
    with pytest.raises(InvalidDatabaseUrl) as raised:
        await SqlStores.connect(url)

    assert isinstance(raised.value, ValueError)
    assert raised.value.code == codes.STORE_INVALID_DATABASE_URL


async def test_a_sqlite_path_that_is_a_directory_is_an_invalid_database_url(
    tmp_path: Path,
) -> None:
    with pytest.raises(InvalidDatabaseUrl, match="directory"):
        await SqlStores.connect(f"sqlite+aiosqlite:///{tmp_path}")


async def test_a_sqlite_path_in_a_missing_directory_is_an_invalid_database_url(
    tmp_path: Path,
) -> None:
    with pytest.raises(InvalidDatabaseUrl, match="does not exist"):
        await SqlStores.connect(f"sqlite+aiosqlite:///{tmp_path / 'nowhere' / 'demo.db'}")

    assert not (tmp_path / "nowhere").exists()
