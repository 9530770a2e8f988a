"""Recorded provider exchanges replayed through the SDKs' own HTTP clients (no network).

An exchange file (tests/models/exchanges/*.json) holds the calls one adapter made, in order:
each with what the request must carry (`expect`: key paths of the JSON body and their values)
and the provider's response (`status`, `headers`, and a JSON `body` or a raw `text`), or
`"raise": "timeout"` for a call that never answered. A block id is derived per run, so a
recorded answer names a ref of the request by its kind (`$receipt`, `$notice`, `$card`): the
request's first ref of that kind. `scripts/record-exchange` writes new ones against a real key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2

EXCHANGES = Path(__file__).parent / "exchanges"


class Replay:
    """The calls of one exchange file, served in order; `requests` holds what was sent."""

    def __init__(self, name: str, exchange: dict[str, Any] | None = None) -> None:
        """The exchange file `name`, or `exchange` itself (one a test derives from a file)."""
        if exchange is None:
            exchange = json.loads((EXCHANGES / f"{name}.json").read_text("utf-8"))
        self.exchange = exchange
        self._calls: Iterator[dict[str, Any]] = iter(self.exchange["calls"])
        self.requests: list[dict[str, Any]] = []
        #: where each request was sent
        self.urls: list[str] = []

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        self.urls.append(str(request.url))
        call = next(self._calls, None)
        if call is None:
            raise AssertionError("the adapter made a call the exchange does not hold")
        for path, value in call.get("expect", {}).items():
            assert _at(body, path) == value, path
        if call.get("raise") == "timeout":
            raise httpx2.ReadTimeout("recorded timeout", request=request)
        response = call["response"]
        answer = response["text"] if "text" in response else json.dumps(response["body"])
        answer = filled(answer, body)
        return httpx2.Response(
            response.get("status", 200),
            headers={"content-type": "application/json", **response.get("headers", {})},
            content=answer.encode("utf-8"),
            request=request,
        )

    def http(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self.handler))

    def openai(self) -> Any:
        import openai

        return openai.AsyncOpenAI(
            api_key="sk-test", http_client=self.http(), max_retries=0, base_url=self.base_url
        )

    def anthropic(self) -> Any:
        import anthropic

        return anthropic.AsyncAnthropic(
            api_key="sk-ant-test", http_client=self.http(), max_retries=0
        )

    @property
    def base_url(self) -> str | None:
        url = self.exchange.get("base_url")
        return url if isinstance(url, str) else None

    @property
    def used_up(self) -> bool:
        return next(self._calls, None) is None


def placeheld(answer: str, sent: dict[str, Any]) -> str:
    """`answer` with the first ref of each kind in the request `sent` written as `$<kind>`
    (what `scripts/record-exchange` keeps); `filled` undoes it."""
    for kind, ref in _first_refs(sent).items():
        if ref.startswith("blk_"):
            answer = answer.replace(ref, f"${kind}")
    return answer


def filled(answer: str, sent: dict[str, Any]) -> str:
    """`answer` with each `$<kind>` replaced by the first ref of that kind in `sent`."""
    for kind, ref in _first_refs(sent).items():
        answer = answer.replace(f"${kind}", ref)
    return answer


def _first_refs(body: dict[str, Any]) -> dict[str, str]:
    """The request's first ref of each kind, when its last message is a narration request."""
    try:
        request = json.loads(body["messages"][-1]["content"])
    except (KeyError, IndexError, TypeError, ValueError):
        return {}
    refs: dict[str, str] = {}
    for ref in request.get("refs", []) if isinstance(request, dict) else []:
        refs.setdefault(ref["kind"], ref["ref"])
    return refs


def _at(body: Any, path: str) -> Any:
    for key in path.split("."):
        body = body[int(key)] if isinstance(body, list) else body[key]
    return body
