"""`python -m examples.chat`: serve the chat example on http://127.0.0.1:8000 (embedded default:
the SQLite file ./turnframe-chat.db and the in-process broker)."""

from __future__ import annotations

import argparse

import uvicorn

from examples.chat.app import SHUTDOWN_GRACE_S, create_app, default_database_url


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m examples.chat", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--db",
        metavar="URL",
        help="the store's database (default: TURNFRAME_CHAT_DB or ./turnframe-chat.db; "
        "postgresql+psycopg://user@host/db works too)",
    )
    parser.add_argument(
        "--no-narrator",
        action="store_true",
        help="every block is server copy (nothing streams as deltas)",
    )
    args = parser.parse_args(argv)
    url = args.db or default_database_url()
    print(f"chat example: http://{args.host}:{args.port}/  (store: {url})")
    uvicorn.run(
        create_app(url, narrate=not args.no_narrator),
        host=args.host,
        port=args.port,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
    )


if __name__ == "__main__":
    main()
