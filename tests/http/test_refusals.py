"""Bad input over HTTP (issue 30): every refusal is a typed error with a stable code, the status
`errors.STATUS` gives, sent before any event, and nothing written (the stores' rows are counted
before and after). Another account's ids answer byte for byte as ids that do not exist."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from http_api import ACCOUNT, CONVERSATION, OTHER, Api, answer_body, card_of

from turnframe_core import codes
from turnframe_runtime.http.errors import INTERNAL_MESSAGE
from turnframe_store import Timeout, Unavailable


def _refused(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json()["code"] == code
    assert set(response.json()) == {"code", "message"}


def _exactly(response: httpx.Response) -> tuple[int, bytes, list[tuple[str, str]]]:
    """What a client can tell apart: the status, the body and every header."""
    return response.status_code, response.content, sorted(response.headers.items())


@pytest.mark.parametrize("account", [None, "refuse"])
async def test_a_request_without_an_account_is_unauthenticated_on_every_route(
    api: Api, account: str | None
) -> None:
    before = await api.rows()
    api.script_name()
    answers = [
        await api.post({"text": "Name Grace Hopper"}, account=account),
        await api.get("/turns/turn_x/events", account=account),
        await api.get("/turns/turn_x", account=account),
        await api.get(f"/conversations/{CONVERSATION}/turns", account=account),
        await api.get(f"/conversations/{CONVERSATION}/feed", account=account),
    ]

    for answer in answers:
        _refused(answer, 401, codes.HTTP_UNAUTHENTICATED)
    assert await api.rows() == before
    assert api.desk.interpreter.calls == 0


async def test_the_account_is_never_taken_from_the_body(api: Api) -> None:
    before = await api.rows()

    response = await api.post({"text": "Name Grace Hopper", "account_id": OTHER})

    _refused(response, 422, codes.TURN_INVALID_INPUT)
    assert await api.rows() == before


async def test_another_accounts_turn_reads_exactly_as_a_turn_that_does_not_exist(
    api: Api,
) -> None:
    api.script_name()
    mine = (await api.turn("Name Grace Hopper")).turn_id

    for path in ("/turns/{}", "/turns/{}/events"):
        foreign = await api.get(path.format(mine), account=OTHER)
        missing = await api.get(path.format("turn_never"), account=OTHER)
        malformed = await api.get(path.format("not-a-turn"), account=OTHER)
        _refused(foreign, 404, codes.STORE_NOT_FOUND)
        assert _exactly(foreign) == _exactly(missing) == _exactly(malformed)


async def test_another_accounts_conversation_reads_exactly_as_one_that_does_not_exist(
    api: Api,
) -> None:
    api.script_name()
    await api.turn("Name Grace Hopper")

    for path in ("/conversations/{}/turns", "/conversations/{}/feed"):
        foreign = await api.get(path.format(CONVERSATION), account=OTHER)
        missing = await api.get(path.format("conv_never"), account=OTHER)
        malformed = await api.get(path.format("not-a-conversation"), account=OTHER)
        _refused(foreign, 404, codes.STORE_NOT_FOUND)
        assert _exactly(foreign) == _exactly(missing) == _exactly(malformed)


async def test_a_malformed_last_event_id_on_the_feed_is_refused(api: Api) -> None:
    api.script_name()
    await api.turn("Name Grace Hopper")

    response = await api.get(
        f"/conversations/{CONVERSATION}/feed", headers={"last-event-id": "one"}
    )

    _refused(response, 400, codes.STREAM_INVALID_LAST_EVENT_ID)


async def test_a_click_on_a_card_not_shown_in_this_conversation_is_refused_and_writes_nothing(
    api: Api,
) -> None:
    api.script_rebooking()
    card = card_of(await api.turn("Rebook the outbound flight"))
    before = await api.rows()

    elsewhere = await api.post(answer_body(card), conversation="conv_2")
    foreign = await api.post(answer_body(card), account=OTHER)
    unknown_body = answer_body(card)
    unknown_body["interaction_response"]["interaction_id"] = "int_never"
    unknown = await api.post(unknown_body)

    _refused(elsewhere, 404, codes.INTERACTION_NOT_FOUND)
    assert elsewhere.content == foreign.content == unknown.content
    assert await api.rows() == before
    clicked = await api.post(answer_body(card), json_answer=True)  # still answerable here
    assert clicked.status_code == 200


async def test_a_body_larger_than_the_limit_is_refused_unread_with_413(api: Api) -> None:
    before = await api.rows()
    big = json.dumps({"text": "x" * 70_000}).encode()

    declared = await api.post(big)

    async def chunks() -> AsyncIterator[bytes]:  # no content-length: counted as it comes
        for start in range(0, len(big), 4_096):
            yield big[start : start + 4_096]

    streamed = await api.post(chunks())

    _refused(declared, 413, codes.HTTP_BODY_TOO_LARGE)
    _refused(streamed, 413, codes.HTTP_BODY_TOO_LARGE)
    assert await api.rows() == before


async def test_a_body_nested_too_deep_is_refused_with_422_not_a_recursion_error(api: Api) -> None:
    before = await api.rows()

    deep = await api.post(b"[" * 30_000 + b"]" * 30_000)
    deep_inside = await api.post(
        ('{"text": "hi", "interaction_response": ' + "[" * 40 + "]" * 40 + "}").encode()
    )

    _refused(deep, 422, codes.HTTP_BODY_TOO_DEEP)
    _refused(deep_inside, 422, codes.HTTP_BODY_TOO_DEEP)
    assert await api.rows() == before


async def test_brackets_inside_the_words_are_not_nesting(api: Api) -> None:
    api.script_name()
    text = "Name Grace Hopper " + "[{" * 100 + '\\"' + "}]" * 100

    response = await api.post({"text": text}, json_answer=True)

    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    "body",
    [b"{not json", b'{"text": NaN}', b"\xff\xfe{}", b"", b'{"text": "hi"} trailing'],
)
async def test_a_body_that_is_not_json_is_a_malformed_request(api: Api, body: bytes) -> None:
    before = await api.rows()

    response = await api.post(body)

    _refused(response, 400, codes.HTTP_MALFORMED_REQUEST)
    assert await api.rows() == before


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",  # what a cross-site <form enctype="text/plain"> sends, no preflight
        "text/plain; charset=utf-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonp",
        "",
        None,
    ],
)
async def test_a_turn_posted_as_anything_but_json_is_refused_unread_and_writes_nothing(
    api: Api, content_type: str | None
) -> None:
    api.script_name()
    before = await api.rows()
    headers = {"x-account": ACCOUNT}
    if content_type is not None:
        headers["content-type"] = content_type
    path = f"/conversations/{CONVERSATION}/turns"
    body = json.dumps({"text": "Name Grace Hopper"}).encode()

    response = await api.client.post(path, content=body, headers=headers)
    too_large = await api.client.post(path, content=b"x" * 70_000, headers=headers)  # unread

    _refused(response, 400, codes.HTTP_MALFORMED_REQUEST)
    _refused(too_large, 400, codes.HTTP_MALFORMED_REQUEST)
    assert await api.rows() == before
    assert api.desk.interpreter.calls == 0


@pytest.mark.parametrize(
    "content_type", ["application/json", "application/json; charset=utf-8", "Application/JSON"]
)
async def test_a_turn_posted_as_json_is_taken_with_or_without_a_charset(
    api: Api, content_type: str
) -> None:
    api.script_name()
    body = json.dumps({"text": "Name Grace Hopper"}).encode()

    response = await api.post(body, headers={"content-type": content_type}, json_answer=True)

    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    "body",
    [
        [],
        "hi",
        {},
        {"text": "hi", "interaction_response": {"interaction_id": "int_1"}},
        {"text": "hi", "turn_id": "not a turn id"},
        {"text": 7},
        {"text": "hi", "mode": "tokens"},
    ],
)
async def test_a_turn_that_is_not_a_turn_is_invalid_input(api: Api, body: Any) -> None:
    before = await api.rows()

    response = await api.post(body)

    _refused(response, 422, codes.TURN_INVALID_INPUT)
    assert await api.rows() == before


async def test_a_turn_id_reused_for_other_words_conflicts_before_any_event(api: Api) -> None:
    api.script_name()
    await api.post({"text": "Name Grace Hopper", "turn_id": "turn_once"})
    before = await api.rows()

    response = await api.post({"text": "Name Ada Lovelace", "turn_id": "turn_once"})

    _refused(response, 409, codes.RUNTIME_IDEMPOTENCY_KEY_REUSED)
    assert await api.rows() == before


@pytest.mark.parametrize("error", [Unavailable("down"), Timeout("slow")])
async def test_a_store_that_cannot_answer_is_503(
    api: Api, error: Exception, monkeypatch: pytest.MonkeyPatch
) -> None:
    api.script_name()
    await api.post({"text": "Name Grace Hopper", "turn_id": "turn_s1"})

    async def failing(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(api.desk.stores.conversations, "stream_tail", failing)
    monkeypatch.setattr(api.desk.stores.conversations, "get_assistant_turn", failing)
    monkeypatch.setattr(api.desk.stores.conversations, "get_conversation", failing)
    for path in ("/turns/turn_s1/events", "/turns/turn_s1", f"/conversations/{CONVERSATION}/turns"):
        _refused(await api.get(path), 503, error.code)  # type: ignore[attr-defined]


async def test_a_posted_turn_the_store_cannot_take_is_503_and_writes_nothing(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = await api.rows()

    @contextlib.asynccontextmanager
    async def unreachable(*args: Any, **kwargs: Any) -> AsyncIterator[None]:
        raise Unavailable("the database is away")
        yield

    monkeypatch.setattr(api.desk.stores, "conversation_lock", unreachable)
    api.script_name()

    response = await api.post({"text": "Name Grace Hopper"})

    _refused(response, 503, codes.STORE_UNAVAILABLE)
    assert await api.rows() == before


async def test_an_unexpected_failure_is_a_500_that_names_no_cause(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret detail acct_1")

    monkeypatch.setattr(api.desk.stores.conversations, "get_conversation", broken)
    transport = httpx.ASGITransport(app=api.app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        response = await client.get(
            f"/conversations/{CONVERSATION}/turns", headers={"x-account": ACCOUNT}
        )

    assert response.status_code == 500
    assert response.json() == {"code": codes.ERROR, "message": INTERNAL_MESSAGE}
