"""`POST /events/{origin}`: an event from outside, signed by its sender, becomes a server turn
(docs/server-events.md); the signature is the authentication, so no account hook is asked and an
origin that signs nothing is never served. Every refusal is typed and writes nothing."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from http_api import ACCOUNT, CONVERSATION, Api

from turnframe_core import AssistantTurn, ServerEvent, codes
from turnframe_core.commands import CommandOrigin, InternalPolicy
from turnframe_runtime import EventOrigin, HmacOrigin, TrustedOrigin


class _Inside(EventOrigin):
    """Code inside the deployment that needs no signature, and judges only that an event has
    content (so an empty payload does not pass its `verify`)."""

    @property
    def requires_signature(self) -> bool:
        return False

    def verify(self, payload: bytes, signature: str | None) -> bool:
        return bool(payload)

    def command_origin(self, event: ServerEvent) -> CommandOrigin:
        return InternalPolicy(policy_key=f"event:{self.name}")


BANK = HmacOrigin("bank", b"a shared secret of the bank")
DESK = TrustedOrigin("desk")
INSIDE = _Inside("inside")


@pytest.fixture
def desk_options() -> dict[str, Any]:
    return {"origins": [BANK, DESK, INSIDE]}


def _event(key: str = "evt-1", **fields: Any) -> dict[str, Any]:
    return {
        "account_id": ACCOUNT,
        "conversation_id": CONVERSATION,
        "idempotency_key": key,
        "workflow": "trip",
        "case_id": "T-100",
        "operation": "trip.set_name",
        "arguments": {"name": "Grace Hopper"},
        **fields,
    }


def _signature(body: dict[str, Any], origin: str = "bank") -> str:
    return BANK.sign(ServerEvent.model_validate({**body, "origin": origin}).signing_bytes())


async def _send(api: Api, body: Any, signature: str | None, origin: str = "bank") -> httpx.Response:
    headers = {} if signature is None else {"x-turnframe-signature": signature}
    return await api.client.post(f"/events/{origin}", json=body, headers=headers)


async def _opened(api: Api) -> None:
    api.script_name("Ada Lovelace")
    await api.turn("Name Ada Lovelace")


async def test_a_signed_event_becomes_a_server_turn_without_asking_for_an_account(
    api: Api,
) -> None:
    await _opened(api)
    applied = sum(api.desk.executor.applied.values())
    body = _event()

    first = await _send(api, body, _signature(body))
    again = await _send(api, body, _signature(body))

    assert first.status_code == 200, first.text
    turn = AssistantTurn.model_validate(first.json()["turn"])
    assert api.desk.receipt_codes(turn) == ["trip.name_set"]
    assert turn == await api.desk.runtime.load_turn(ACCOUNT, turn.turn_id)
    assert again.json() == first.json()  # the same event is the same turn
    assert sum(api.desk.executor.applied.values()) == applied + 1  # one effect


@pytest.mark.parametrize(
    ("origin", "signature"),
    [
        ("bank", None),
        ("bank", "0" * 64),
        ("nobody", "0" * 64),
        ("desk", "anything"),  # unsigned by design: code inside the deployment, never HTTP
        ("desk", None),
        ("inside", None),  # says it needs no signature: never served, whatever it verifies
    ],
)
async def test_an_event_whose_sender_is_not_verified_is_401_and_writes_nothing(
    api: Api, origin: str, signature: str | None
) -> None:
    await _opened(api)
    before = await api.rows()

    response = await _send(api, _event(), signature, origin=origin)

    assert response.status_code == 401
    assert response.json()["code"] == codes.SERVER_EVENT_ORIGIN_NOT_VERIFIED
    assert await api.rows() == before


async def test_an_event_naming_another_origin_than_its_path_is_refused(api: Api) -> None:
    await _opened(api)
    body = _event(origin="desk")

    response = await _send(api, body, _signature(body, "desk"))

    assert response.status_code == 422
    assert response.json()["code"] == codes.TURN_INVALID_INPUT


async def test_an_operation_the_domain_refuses_is_422_and_writes_nothing(api: Api) -> None:
    await _opened(api)
    before = await api.rows()
    body = _event(arguments={"name": "R2D2 4ever"})

    response = await _send(api, body, _signature(body))

    assert response.status_code == 422
    assert response.json()["code"] == codes.SERVER_EVENT_REFUSED
    assert await api.rows() == before


async def test_a_key_sent_again_with_another_event_is_409_and_writes_nothing(api: Api) -> None:
    await _opened(api)
    body = _event()
    await _send(api, body, _signature(body))
    before = await api.rows()
    other = _event(arguments={"name": "Ada Lovelace"})

    response = await _send(api, other, _signature(other))

    assert response.status_code == 409
    assert response.json()["code"] == codes.RUNTIME_IDEMPOTENCY_KEY_REUSED
    assert await api.rows() == before


async def test_an_event_for_a_conversation_that_does_not_exist_is_404(api: Api) -> None:
    body = _event(conversation_id="conv_never")

    response = await _send(api, body, _signature(body))

    assert response.status_code == 404
    assert response.json()["code"] == codes.STORE_NOT_FOUND


async def test_an_event_body_is_bounded_like_any_other(api: Api) -> None:
    as_json = {"content-type": "application/json"}
    deep = await api.client.post(
        "/events/bank", content=b"[" * 5_000 + b"]" * 5_000, headers=as_json
    )
    large = await api.client.post(
        "/events/bank", content=json.dumps({"x": "y" * 70_000}), headers=as_json
    )

    assert (deep.status_code, deep.json()["code"]) == (422, codes.HTTP_BODY_TOO_DEEP)
    assert (large.status_code, large.json()["code"]) == (413, codes.HTTP_BODY_TOO_LARGE)


@pytest.mark.parametrize("content_type", ["text/plain", None])
async def test_an_event_posted_as_anything_but_json_is_refused_and_writes_nothing(
    api: Api, content_type: str | None
) -> None:
    await _opened(api)
    before = await api.rows()
    body = _event()
    headers = {"x-turnframe-signature": _signature(body)}
    if content_type is not None:
        headers["content-type"] = content_type

    response = await api.client.post("/events/bank", content=json.dumps(body), headers=headers)

    assert response.status_code == 400, response.text
    assert response.json()["code"] == codes.HTTP_MALFORMED_REQUEST
    assert await api.rows() == before
