"""A runtime process for real-process tests: `python -m turnframe_test.turn_server --db URL`.

It loads the app (`--app MODULE:FACTORY`, default the shared travel desk), finishes every turn
a crash left (`recover_unfinished`, as any runtime must when it starts), says so on one line,
then takes turns as JSON lines on stdin and answers each on stdout, several at once:

    in:  {"id": 7, "input": <TurnInput>}
    out: {"id": 7, "turn": <AssistantTurn>}   or   {"id": 7, "error": <code>, "type": <name>}

A client that loses the process mid-turn knows only that the turn's outcome is unknown; it sends
the same request (the same turn id) again to a live process, as a browser retries a request.
Nothing is kept in the process: it may be killed at any moment and another started.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from turnframe_core import TurnframeError, TurnInput
from turnframe_runtime import RecoveryOutcome, TurnRuntime
from turnframe_runtime.cli_app import load_runtime

__all__ = ["serve"]

_DEFAULT_APP = "turnframe_test.outbox_app:desk_runtime"


async def serve(runtime: TurnRuntime, *, sweep_ms: int = 2_000) -> None:
    """Recover, announce readiness, then answer turns from stdin until it closes; every
    `sweep_ms`, finish turns another process left unfinished for longer than that."""
    report = await runtime.recover_unfinished()
    recovered = {str(o): report.count(o) for o in RecoveryOutcome if report.count(o)}
    _say({"ready": True, "pid": os.getpid(), "recovered": recovered})
    sweeper = asyncio.create_task(_sweep(runtime, sweep_ms))
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    running: set[asyncio.Task[None]] = set()
    while line := await reader.readline():
        task = asyncio.create_task(_answer(runtime, json.loads(line)))
        running.add(task)
        task.add_done_callback(running.discard)
    if running:
        await asyncio.gather(*running)
    sweeper.cancel()


async def _sweep(runtime: TurnRuntime, every_ms: int) -> None:
    while True:
        await asyncio.sleep(every_ms / 1000)
        await runtime.recover_unfinished(older_than_ms=every_ms)


async def _answer(runtime: TurnRuntime, request: dict[str, Any]) -> None:
    try:
        turn = await runtime.handle_turn(TurnInput.model_validate(request["input"]))
    except TurnframeError as error:
        _say({"id": request["id"], "error": error.code, "type": type(error).__name__})
        return
    except Exception as error:  # a store or executor failure: the client sees its type only
        _say({"id": request["id"], "error": "unexpected", "type": type(error).__name__})
        return
    _say({"id": request["id"], "turn": turn.model_dump(mode="json")})


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def _main(app: str, db: str) -> None:
    runtime = await load_runtime(app, db)
    try:
        await serve(runtime)
    finally:
        await runtime.stores.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m turnframe_test.turn_server")
    parser.add_argument("--db", required=True, metavar="URL")
    parser.add_argument("--app", default=_DEFAULT_APP, metavar="MODULE:FACTORY")
    args = parser.parse_args()
    asyncio.run(_main(args.app, args.db))


if __name__ == "__main__":
    main()
