"""Mounted in an adopter's app: the routes answer under the mount path, and a runtime given as
a factory is opened by the app's lifespan (run by the parent) and closed when it stops."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx
from http_api import ACCOUNT, CONVERSATION, authenticate, named, served
from starlette.applications import Starlette
from starlette.routing import Mount

from turnframe_core import AssistantTurn, codes
from turnframe_runtime import TurnRuntime
from turnframe_runtime.http import create_app
from turnframe_test import DeskHarness


async def test_a_mounted_app_opens_its_runtime_with_the_parents_lifespan_and_closes_it() -> None:
    desk = DeskHarness()
    desk.ready_trip()
    desk.interpreter.then(named())
    log: list[str] = []

    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[TurnRuntime]:
        log.append("opened")
        yield desk.runtime
        log.append("closed")

    api = create_app(opened, authenticate=authenticate)
    app = Starlette(routes=[Mount("/api", app=api)], lifespan=api.router.lifespan_context)
    async with served(app) as client:
        response = await client.post(
            f"/api/conversations/{CONVERSATION}/turns",
            json={"text": "Name Grace Hopper"},
            headers={"x-account": ACCOUNT, "accept": "application/json"},
        )
        assert log == ["opened"]

    assert response.status_code == 200, response.text
    turn = AssistantTurn.model_validate(response.json()["turn"])
    assert desk.receipt_codes(turn) == ["trip.name_set"]
    assert log == ["opened", "closed"]


async def test_a_factory_app_whose_lifespan_never_ran_fails_as_a_fault() -> None:
    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[TurnRuntime]:
        yield DeskHarness().runtime

    api = create_app(opened, authenticate=authenticate)
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)  # runs no lifespan
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        response = await client.get("/turns/turn_x", headers={"x-account": ACCOUNT})

    assert response.status_code == 500
    assert response.json()["code"] == codes.ERROR
