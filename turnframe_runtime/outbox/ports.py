"""The outbox's ports: what a destination's sender answers, and how a workflow applies it.

A sender carries one outbox row to one destination (an airline, a payment provider) with the
row's idempotency key, which the destination must honour: the same key twice takes effect once.
It answers with what it knows:

- `SendCompleted`: the destination accepted and did it (its reference, and any answer fields);
- `SendFailed`: it refused (a code; `retryable` when trying again later may succeed);
- `SendUnknown`: the request may have arrived and nobody knows what came of it (a timeout after
  sending). Raising is the same as `SendUnknown`: a sender that knows the request never left
  returns a retryable `SendFailed` instead.

`reconcile` asks the destination what became of an earlier request with the same key; besides
the three answers above it may say `NotReceived` (then, and only then, the row is sent again).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from turnframe_core.cases import CaseRef
from turnframe_core.workflow import CompiledCommand
from turnframe_store.records import OutboxEntry

__all__ = [
    "AppliesExternalAnswers",
    "NotReceived",
    "OutboxRequest",
    "OutboxSender",
    "SendCompleted",
    "SendFailed",
    "SendResult",
    "SendUnknown",
]


@dataclass(frozen=True)
class OutboxRequest:
    """One outbox row as its sender sees it."""

    outbox_id: str
    destination: str
    idempotency_key: str
    account_id: str
    case_ref: CaseRef
    command_type: str
    payload: Mapping[str, Any]
    attempt: int

    @classmethod
    def of(cls, row: OutboxEntry) -> OutboxRequest:
        body = row.payload
        return cls(
            outbox_id=row.outbox_id,
            destination=row.destination,
            idempotency_key=row.idempotency_key,
            account_id=str(body["account_id"]),
            case_ref=CaseRef.model_validate(body["case_ref"]),
            command_type=str(body["command_type"]),
            payload=dict(body.get("payload") or {}),
            attempt=row.attempt_count,
        )


@dataclass(frozen=True)
class SendCompleted:
    """The destination did it: its reference, and what else it answered."""

    reference: str
    answer: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SendFailed:
    """The destination refused. `retryable`: a later attempt may succeed."""

    code: str
    retryable: bool = False
    detail: str | None = None


@dataclass(frozen=True)
class SendUnknown:
    """Sent, answer unknown (e.g. a timeout): reconciliation settles it."""

    reason: str = "unknown"
    reference: str | None = None


@dataclass(frozen=True)
class NotReceived:
    """From `reconcile`: the destination never got a request with this key."""


SendResult = SendCompleted | SendFailed | SendUnknown


@runtime_checkable
class OutboxSender(Protocol):
    async def send(self, request: OutboxRequest) -> SendResult:
        """Carry the request out, idempotently on `request.idempotency_key`."""
        ...

    async def reconcile(self, request: OutboxRequest) -> SendResult | NotReceived:
        """What became of an earlier request with this key."""
        ...


@runtime_checkable
class AppliesExternalAnswers(Protocol):
    """A workflow whose external commands get an answer: the command that records it on the
    case. It runs with a verified external-callback origin, through the executor, the journal
    and the commit bundle like any command, in a follow-up turn the server writes (receipts
    and notices only, no model call). None records nothing on the case; the follow-up turn
    then tells only that the request failed, when it did."""

    def external_answer(
        self, request: OutboxRequest, result: SendCompleted | SendFailed
    ) -> CompiledCommand | None: ...
