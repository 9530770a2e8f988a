"""`turnframe eval CORPUS --app MODULE:FACTORY [--json FILE] [--html FILE]`: a labelled corpus
through the adopter's runtime (docs/eval.md).

The app is loaded as `turnframe worker` loads it (`--app`, or `$TURNFRAME_APP`): `FACTORY(url)`
builds a runtime on the database at `url`. Without `--db` that is a fresh SQLite file in a
temporary directory, migrated before the factory sees it and gone afterwards. Exit 0 when every
case passes, 1 when one fails, 2 when the corpus, the price table or the app cannot be used or
a report cannot be written.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from turnframe_runtime.cli_app import Unusable, load_runtime
from turnframe_runtime.eval_report import render_html, render_text, report_json
from turnframe_runtime.evaluation import (
    CaseResult,
    Corpus,
    CorpusError,
    load_corpus,
    load_prices,
    new_run_id,
    run_corpus,
)
from turnframe_store import SqlStores

__all__ = ["register"]


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "eval", help="run a labelled corpus through your runtime and judge each case"
    )
    parser.add_argument("corpus", metavar="CORPUS", help="the corpus (JSON lines, docs/eval.md)")
    parser.add_argument(
        "--app",
        metavar="MODULE:FACTORY",
        default=os.environ.get("TURNFRAME_APP"),
        help="builds your TurnRuntime on a database URL (default: $TURNFRAME_APP; one of the "
        "two is required)",
    )
    parser.add_argument(
        "--db",
        metavar="URL",
        help="the database the runtime runs on (default: a fresh SQLite file in a temporary "
        "directory)",
    )
    parser.add_argument(
        "--prices",
        metavar="FILE",
        help='per model, US dollars per million tokens: {"MODEL": {"input_per_million": …, '
        '"output_per_million": …}} (over the corpus\'s own price table)',
    )
    parser.add_argument("--json", metavar="FILE", dest="json_file", help="also write JSON here")
    parser.add_argument("--html", metavar="FILE", dest="html_file", help="also write HTML here")
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    if not args.app or ":" not in args.app:
        print("turnframe eval: --app MODULE:FACTORY (or TURNFRAME_APP) is needed", file=sys.stderr)
        return 2
    try:
        corpus = load_corpus(args.corpus)
        if args.prices:
            corpus = Corpus(corpus.cases, {**corpus.prices, **load_prices(args.prices)})
    except CorpusError as bad:
        print(f"turnframe eval: {bad.message} [{bad.code}]", file=sys.stderr)
        return 2
    for path in (args.json_file, args.html_file):
        unwritable = _unwritable(path)
        if unwritable:
            print(f"turnframe eval: cannot write {path}: {unwritable}", file=sys.stderr)
            return 2
    run = new_run_id()
    try:
        results = asyncio.run(_evaluate(args.app, args.db, corpus, run))
    except Unusable as unusable:
        print(f"turnframe eval: {unusable}", file=sys.stderr)
        return 2
    name = Path(args.corpus).name
    print(f"turnframe eval: run {run}")
    sys.stdout.write(render_text(results, corpus=name, app=args.app))
    reports: list[tuple[str, str]] = []
    if args.json_file:
        report = {"run": run, **report_json(results, corpus=name, app=args.app)}
        reports.append((args.json_file, json.dumps(report, indent=2, ensure_ascii=False) + "\n"))
    if args.html_file:
        reports.append((args.html_file, render_html(results, corpus=name, app=args.app)))
    for path, text in reports:
        try:
            Path(path).write_text(text, encoding="utf-8")
        except OSError as unwritable:
            print(f"turnframe eval: cannot write {path}: {unwritable.strerror}", file=sys.stderr)
            return 2
    return 0 if all(r.passed for r in results) else 1


def _unwritable(path: str | None) -> str | None:
    """Why a report cannot go to `path`, known before any case runs (its folder is missing, or
    it is a folder); None when it may."""
    if path is None:
        return None
    if Path(path).is_dir():
        return "Is a directory"
    if not Path(path).parent.is_dir():
        return "No such directory"
    return None


async def _evaluate(app: str, db: str | None, corpus: Corpus, run: str) -> list[CaseResult]:
    with tempfile.TemporaryDirectory(prefix="turnframe-eval-") as scratch:
        if db is None:
            db = f"sqlite+aiosqlite:///{Path(scratch) / 'eval.db'}"
            stores = await SqlStores.connect(db)
            try:
                await stores.migrate()
            finally:
                await stores.aclose()
        runtime = await load_runtime(app, db)
        try:
            return await run_corpus(runtime, corpus, run=run)
        finally:
            await runtime.stores.aclose()
