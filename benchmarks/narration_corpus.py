"""The narration corpus's figures: claims leaked and honest lines kept, per narration mode, store
and language, measured through real turns of the travel desk (`turnframe_test.narration_eval`;
docs/narration.md shows the tables).

Run: `.venv/bin/python benchmarks/narration_corpus.py [--stores memory,sqlite,postgres]
[--modes free,structured] [--url URL] [--misses]`
(URL default: TURNFRAME_TEST_DATABASE_URL, else postgresql+psycopg://postgres@127.0.0.1:5432/test;
the PostgreSQL store works in schemas of its own and drops them afterwards). Structured mode is
measured only where the runtime has it. `--misses` lists each leaked claim and lost honest line
of the first store measured.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

from turnframe_test.backends import BACKENDS, StoreBackend
from turnframe_test.narration_eval import (
    MODES,
    Figures,
    LineResult,
    Mode,
    measure,
)

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


async def _measure(stores: list[str], modes: list[Mode], url: str) -> Figures:
    results: list[LineResult] = []
    with tempfile.TemporaryDirectory() as scratch:
        for name in stores:
            server = url if name == "postgres" else None
            async with StoreBackend(name, Path(scratch), server) as backend:
                for mode in modes:
                    results.extend(await measure(backend, mode))
    return Figures(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default=",".join(BACKENDS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--url", default=os.environ.get("TURNFRAME_TEST_DATABASE_URL", DEFAULT_URL))
    parser.add_argument("--misses", action="store_true")
    args = parser.parse_args()
    modes: list[Mode] = [m for m in MODES if m in args.modes.split(",")]
    figures = asyncio.run(_measure(args.stores.split(","), modes, args.url))
    print(figures.table())
    print()
    print(figures.kinds_table())
    if args.misses:
        for mode in modes:
            print(f"\n{mode}:")
            for r in figures.misses(mode):
                kind = "leaked" if r.leaked else "lost"
                print(f"  {kind} {r.line.id} [{r.line.context}] {r.findings}: {r.line.text}")


if __name__ == "__main__":
    main()
