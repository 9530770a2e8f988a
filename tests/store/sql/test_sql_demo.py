"""`turnframe demo` keeps its data in a database: a SQLite file by default, any URL with --db, and
a second run reloads the first run's conversation exactly as stored."""

from __future__ import annotations

import io
import re
from pathlib import Path

import psycopg
import pytest
from services import Databases

from turnframe_runtime.cli import main
from turnframe_store.sql.url import parse_url
from turnframe_test.demo import DEMO_DB_FILE, run_demo

STORED = re.compile(r"stored bytes (sha256:[0-9a-f]{64})")


async def test_a_second_demo_run_reloads_the_first_runs_conversation(
    databases: Databases,
) -> None:
    url = await _demo_url(databases)
    first, second = io.StringIO(), io.StringIO()

    await run_demo(first, db=url)
    await run_demo(second, db=url)

    printed = second.getvalue()
    assert "Run 1: a new conversation, conv_demo_0001" in first.getvalue()
    assert "Reloaded run 1 from the store: conv_demo_0001, 10 turns, replay chain intact" in printed
    assert "Run 2: a new conversation, conv_demo_0002" in printed
    first_run_turn_one = STORED.search(first.getvalue())
    reloaded_turn_one = STORED.search(printed)
    assert first_run_turn_one and reloaded_turn_one
    assert reloaded_turn_one.group(1) == first_run_turn_one.group(1)


async def _demo_url(databases: Databases) -> str:
    """The demo takes a URL only: on PostgreSQL, one whose search path is the test's schema."""
    database = databases.new()
    if database.backend == "sqlite":
        return database.url
    schema = database.config.schema
    async with await psycopg.AsyncConnection.connect(
        parse_url(database.url)[1], autocommit=True
    ) as connection:
        await connection.execute(f'CREATE SCHEMA "{schema}"')
    return f"{database.url}?options=-csearch_path%3D{schema}"


def test_the_demo_command_defaults_to_a_sqlite_file_in_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)

    assert main(["demo"]) == 0

    printed = capsys.readouterr().out
    assert f"Store: {tmp_path / DEMO_DB_FILE}" in printed
    assert (tmp_path / DEMO_DB_FILE).is_file()
    assert "Reloaded turn 1 from the store: identical blocks" in printed
