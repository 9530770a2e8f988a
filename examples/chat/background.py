"""The chat app under uvicorn in a background thread on 127.0.0.1 (a free port): for the
screenshot script and the tests, which drive it over real HTTP."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import uvicorn

from examples.chat.app import SHUTDOWN_GRACE_S, create_app
from examples.chat.desk import ChatDesk, Database

__all__ = ["BackgroundServer"]

T = TypeVar("T")


class BackgroundServer:
    """`start()` serves the app until `stop()`; `call` runs a coroutine on the server's event
    loop, where its stores live."""

    def __init__(self, database: Database, *, narrate: bool = True) -> None:
        self.app = create_app(database, narrate=narrate)
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port: int = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = uvicorn.Server(
            uvicorn.Config(
                self.app, log_level="warning", timeout_graceful_shutdown=SHUTDOWN_GRACE_S
            )
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="chat-server", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._server.serve(sockets=[self._socket]))

    def start(self, timeout_s: float = 20) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the chat app did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(20)
        self._socket.close()
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def desk(self) -> ChatDesk:
        desk: ChatDesk = self.app.state.desk
        return desk

    def call(self, coroutine: Coroutine[Any, Any, T], timeout_s: float = 20) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout_s)
