"""The HTTP layer over a travel desk (`http_api.Api`): `create_app` over the desk's runtime,
through httpx's ASGI transport, authenticated by an `x-account` header. The desk runs on memory
unless a module asks for every backend (its own `store_backend`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from http_api import Api, authenticate

from turnframe_runtime.http import create_app
from turnframe_test import DeskHarness
from turnframe_test.backends import StoreBackend


@pytest_asyncio.fixture(params=["memory"], name="store_backend")
async def _memory_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoreBackend]:
    async with StoreBackend(request.param, tmp_path) as backend:
        yield backend


@pytest.fixture
def api_options() -> dict[str, Any]:
    """What the `api` fixture passes to `create_app` (a test module overrides it)."""
    return {}


@pytest.fixture
def desk_options() -> dict[str, Any]:
    """What the `api` fixture builds its desk with (a test overrides it)."""
    return {}


@pytest.fixture
async def api(
    make_desk: Callable[..., Any], api_options: dict[str, Any], desk_options: dict[str, Any]
) -> AsyncIterator[Api]:
    """A desk with a ready trip, served by `create_app` over httpx's ASGI transport."""
    desk: DeskHarness = await make_desk(**desk_options)
    desk.ready_trip()
    app = create_app(desk.runtime, authenticate=authenticate, **api_options)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://turnframe.test") as client:
        yield Api(desk, app, client)
