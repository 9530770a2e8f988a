"""The `turnframe` command line. Subcommands come from the `turnframe.commands` entry-point group,
so packages that ship their own commands (the test kit's `demo`) plug in without the runtime
importing them.

A subcommand returns its exit code. A Turnframe error it raises is printed as one line on stderr
(message and code, no traceback) and exits 1; a subcommand that judges an error to be a usage
error prints its own line and returns 2, as argparse does for bad arguments."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points, version

from turnframe_core.errors import TurnframeError

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="turnframe", description="Turnframe for Python")
    parser.add_argument("--version", action="version", version=f"turnframe {version('turnframe')}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for entry in sorted(entry_points(group="turnframe.commands"), key=lambda e: e.name):
        register: Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None] = (
            entry.load()
        )
        register(commands)
    args = parser.parse_args(argv)
    run = getattr(args, "run", None)
    if run is None:
        parser.print_help()
        return 0
    try:
        result: int = run(args)
    except TurnframeError as error:
        print(f"turnframe {args.command}: {error.message} [{error.code}]", file=sys.stderr)
        return 1
    return result
