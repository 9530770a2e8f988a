"""A process whose code fails before `aclose()` still exits: SQLite's worker threads never keep
the interpreter alive."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FAILS_BEFORE_ACLOSE = """
import asyncio, sys
from turnframe_store import SqlStores

async def main(url):
    stores = await SqlStores.connect(url)
    await stores.migrate()
    await stores.conversations.ensure_conversation("acct_1", "conv_1")
    raise RuntimeError("the adopter's code failed before aclose()")

asyncio.run(main(sys.argv[1]))
"""

FORGETS_ACLOSE = """
import asyncio, sys
from turnframe_store import SqlStores

KEPT = []

async def main(url):
    stores = await SqlStores.connect(url)
    await stores.migrate()
    KEPT.append(stores)

asyncio.run(main(sys.argv[1]))
print("done")
"""


def _run(script: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'exit.db'}"
    return subprocess.run(
        [sys.executable, "-c", script, url], capture_output=True, text=True, timeout=20
    )


def test_a_process_that_raises_before_aclose_exits_at_once(tmp_path: Path) -> None:
    ran = _run(FAILS_BEFORE_ACLOSE, tmp_path)  # before the fix: hangs, and the timeout fails it

    assert ran.returncode == 1
    assert "the adopter's code failed before aclose()" in ran.stderr


def test_a_process_that_keeps_unclosed_stores_exits_at_once(tmp_path: Path) -> None:
    ran = _run(FORGETS_ACLOSE, tmp_path)

    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "done\n"


def test_what_was_committed_before_the_exit_is_still_there(tmp_path: Path) -> None:
    _run(FAILS_BEFORE_ACLOSE, tmp_path)

    check = """
import asyncio, sys
from turnframe_store import SqlStores

async def main(url):
    stores = await SqlStores.connect(url)
    try:
        print((await stores.conversations.get_conversation("acct_1", "conv_1")).conversation_id)
    finally:
        await stores.aclose()

asyncio.run(main(sys.argv[1]))
"""
    ran = _run(check, tmp_path)
    assert ran.stdout == "conv_1\n", ran.stderr
