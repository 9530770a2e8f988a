"""`turnframe recover --db URL --app MODULE:FACTORY` finishes interrupted turns from the command
line, and refuses to run without the factory that builds the adopter's runtime."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from turnframe_core import TurnInput, TurnPhase, TurnStatus
from turnframe_store import FaultPoint, SqlStores, Timeout
from turnframe_test import DeskHarness, act, understanding

TURNFRAME = [
    sys.executable,
    "-c",
    "from turnframe_runtime.cli import main; raise SystemExit(main())",
]


async def _interrupted_turn(url: str) -> None:
    stores = await SqlStores.connect(url)
    await stores.migrate()
    try:
        desk = DeskHarness(stores=stores)
        desk.ready_trip()
        desk.interpreter.then(understanding(act("a1", "trip.set_name", "h1", "Ada", name="Ada")))
        stores.faults.arm(FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT)
        with pytest.raises(Timeout):
            await desk.runtime.handle_turn(
                TurnInput(
                    account_id="acct_1",
                    conversation_id="conv_1",
                    text="Name Ada",
                    turn_id="turn_cli",
                )
            )
    finally:
        await stores.aclose()


async def _phase_and_status(url: str) -> tuple[TurnPhase, TurnStatus]:
    stores = await SqlStores.connect(url)
    try:
        marker = await stores.conversations.get_phase("acct_1", "turn_cli")
        turn = await stores.conversations.get_assistant_turn("acct_1", "turn_cli")
        return marker.phase, turn.status
    finally:
        await stores.aclose()


def test_recover_finishes_an_interrupted_turn_from_the_command_line(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'tf.db'}"
    asyncio.run(_interrupted_turn(url))
    done = subprocess.run(
        [*TURNFRAME, "recover", "--db", url, "--app", "turnframe_test.demo:recovery_runtime"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "recovered 1 turn(s)" in done.stdout and "interrupted 1" in done.stdout
    assert asyncio.run(_phase_and_status(url)) == (TurnPhase.DELIVERED, TurnStatus.INTERRUPTED)


def test_recover_without_an_app_is_a_usage_error(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'tf.db'}"
    done = subprocess.run(
        [*TURNFRAME, "recover", "--db", url],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 2
    assert "--app MODULE:FACTORY" in done.stderr
