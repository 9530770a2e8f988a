"""Domain events (the append-only ledger a receipt cites) and what a workflow asks a receipt
to say."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from turnframe_core.canonical import digest
from turnframe_core.cases import CaseId, CaseKey, WorkflowKey
from turnframe_core.ids import AccountId, CommandId, EventId
from turnframe_core.model import FrozenModel, Millis, NonEmptyStr, Revision

__all__ = ["DomainEvent", "ReceiptSeverity", "ReceiptSpec", "event_digest"]


class DomainEvent(FrozenModel):
    """A committed fact about one case. Immutable; `sequence` is assigned by the ledger on append
    (unique and increasing store-wide) and is None only before the append."""

    event_id: EventId
    account_id: AccountId
    workflow: WorkflowKey
    case_id: CaseId
    case_revision: Revision
    command_id: CommandId
    event_type: NonEmptyStr
    payload: dict[str, Any] = Field(default_factory=dict)
    occurred_at: Millis
    sequence: int | None = Field(default=None, ge=1)

    @property
    def case_key(self) -> CaseKey:
        return CaseKey(workflow=self.workflow, case_id=self.case_id)


def event_digest(event: DomainEvent) -> str:
    """The digest of an event as committed: everything but the sequence the ledger assigns."""
    return digest(event.model_dump(mode="json", exclude={"sequence"}))


class ReceiptSeverity(StrEnum):
    SUCCESS = "success"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class ReceiptSpec(FrozenModel):
    """A workflow's instruction for one receipt: which template, with which parameters, citing
    which committed events. The runtime renders it; the receipt id is derived from the events."""

    status_code: NonEmptyStr
    severity: ReceiptSeverity = ReceiptSeverity.SUCCESS
    template_id: NonEmptyStr
    params: dict[str, Any] = Field(default_factory=dict)
    event_ids: tuple[EventId, ...] = Field(min_length=1)
