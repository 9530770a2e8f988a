"""CORS is off unless configured: no header names an origin without a `CorsConfig`; with one,
the configured origins get the preflight and the turn id header, others get nothing."""

from __future__ import annotations

import httpx
from http_api import CONVERSATION, authenticate

from turnframe_runtime.http import CorsConfig, create_app
from turnframe_test import DeskHarness

ORIGIN = "https://desk.example"


async def _answers(cors: CorsConfig | None, origin: str) -> tuple[httpx.Response, httpx.Response]:
    desk = DeskHarness()
    app = create_app(desk.runtime, authenticate=authenticate, cors=cors)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        preflight = await client.options(
            f"/conversations/{CONVERSATION}/turns",
            headers={
                "origin": origin,
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type, last-event-id",
            },
        )
        read = await client.get(
            "/turns/turn_never", headers={"origin": origin, "x-account": "acct_1"}
        )
    return preflight, read


def _cors_headers(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.startswith("access-control-")}


async def test_without_a_cors_config_no_response_carries_a_cors_header() -> None:
    preflight, read = await _answers(None, ORIGIN)

    assert _cors_headers(preflight) == {}
    assert _cors_headers(read) == {}
    assert read.status_code == 404


async def test_a_configured_origin_may_post_and_read_the_turn_id_header() -> None:
    preflight, read = await _answers(CorsConfig(allow_origins=[ORIGIN]), ORIGIN)

    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert "last-event-id" in preflight.headers["access-control-allow-headers"].lower()
    assert read.headers["access-control-allow-origin"] == ORIGIN
    assert "x-turn-id" in read.headers["access-control-expose-headers"]


async def test_an_origin_not_configured_gets_no_cors_header() -> None:
    preflight, read = await _answers(CorsConfig(allow_origins=[ORIGIN]), "https://evil.example")

    assert preflight.status_code == 400
    assert "access-control-allow-origin" not in preflight.headers
    assert "access-control-allow-origin" not in read.headers
