"""The `turnframe` command line."""

from __future__ import annotations

import argparse
from importlib.metadata import version

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="turnframe", description=__doc__)
    parser.add_argument("--version", action="version", version=f"turnframe {version('turnframe')}")
    parser.parse_args(argv)
    parser.print_help()
    return 0
