"""The `turnframe` command line. Subcommands come from the `turnframe.commands` entry-point group,
so packages that ship their own commands (the test kit's `demo`) plug in without the runtime
importing them."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points, version

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
    result: int = run(args)
    return result
