"""The chat example's ASGI app: the library's HTTP app (`turnframe_runtime.http.create_app`)
mounted at `/api`, and the page that talks to it.

Routes:
- `GET /`: the chat page (static/index.html); it gives a browser without one an account of its
  own: an unguessable id in an HttpOnly cookie, which `authenticate` reads on every API call
  (no cookie: 401);
- `/api/...`: the library's routes (docs/http.md): turns posted and streamed, resumed, read back,
  and one feed per conversation that delivers every stored turn, the airline's follow-ups
  included;
- `/static/...`: the page's script and style.

The desk (runtime, outbox worker, fake airline) opens when the app starts, on its event loop, and
closes when it stops.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from examples.chat.desk import ChatDesk, Database, open_desk
from turnframe_runtime import TurnRuntime
from turnframe_runtime.http import create_app as create_api

__all__ = [
    "ACCOUNT_COOKIE",
    "DEFAULT_DATABASE_FILE",
    "SHUTDOWN_GRACE_S",
    "app",
    "authenticate",
    "create_app",
    "default_database_url",
]

STATIC: Final = Path(__file__).resolve().parent / "static"
DEFAULT_DATABASE_FILE: Final = "turnframe-chat.db"
#: the browser's account: set by the page, read by `authenticate`
ACCOUNT_COOKIE: Final = "turnframe_chat_account"
_ACCOUNT: Final = re.compile(r"acct_[0-9a-f]{32}")
#: a year: the browser keeps its conversations across restarts of the browser
_COOKIE_AGE_S: Final = 365 * 24 * 3600
#: how long a stopping server waits for open responses: a feed never ends by itself (its page
#: reconnects to the next server with Last-Event-ID), so the server cuts it after this
SHUTDOWN_GRACE_S: Final = 2


def default_database_url() -> str:
    """`TURNFRAME_CHAT_DB` when set, else the SQLite file ./turnframe-chat.db."""
    given = os.environ.get("TURNFRAME_CHAT_DB")
    if given:
        return given
    return f"sqlite+aiosqlite:///{Path.cwd().resolve() / DEFAULT_DATABASE_FILE}"


def _account(request: Request) -> str | None:
    given = request.cookies.get(ACCOUNT_COOKIE)
    return given if given is not None and _ACCOUNT.fullmatch(given) else None


async def authenticate(request: Request) -> str | None:
    """The account the browser was given with the page (None: 401)."""
    return _account(request)


async def page(request: Request) -> Response:
    response = FileResponse(STATIC / "index.html", headers={"cache-control": "no-store"})
    if _account(request) is None:  # 128 random bits: the id is the browser's credential
        response.set_cookie(
            ACCOUNT_COOKIE,
            "acct_" + secrets.token_hex(16),
            max_age=_COOKIE_AGE_S,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
    return response


def create_app(database: Database | None = None, *, narrate: bool = True) -> Starlette:
    """The app on `database` (a URL, default `default_database_url()`, or a function opening
    ready stores), opened when the app starts (on its event loop), closed when it stops."""

    @contextlib.asynccontextmanager
    async def desk_runtime() -> AsyncIterator[TurnRuntime]:
        desk = await open_desk(database or default_database_url(), narrate=narrate)
        app.state.desk = desk
        try:
            yield desk.runtime
        finally:
            await desk.close()

    async def on_conversation(account_id: str, conversation_id: str) -> None:
        chat: ChatDesk = app.state.desk
        await chat.open_trip(account_id, conversation_id)

    api = create_api(desk_runtime, authenticate=authenticate, on_conversation=on_conversation)

    app = Starlette(
        routes=[
            Route("/", page),
            Mount("/api", app=api),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        lifespan=api.router.lifespan_context,  # a mounted app's lifespan is ours to run
    )
    return app


#: `uvicorn examples.chat.app:app` serves this one (the SQLite file in the current directory)
app = create_app()
