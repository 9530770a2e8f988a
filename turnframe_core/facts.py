"""Narratable facts: the only material a model-authored block may rest on.

Each model-authored block lists the facts it used. Two kinds are claims the claim guard checks
structurally: an operational outcome must cite a receipt block of the same turn whose events cover
it, and an available interaction must cite an interaction block of the same turn.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field

from turnframe_core.cases import CaseRef
from turnframe_core.ids import EventId, InteractionId, OptionId, ReceiptId
from turnframe_core.interactions import InteractionKind
from turnframe_core.model import FrozenModel, NonEmptyStr

__all__ = [
    "ActAwaitingConfirmation",
    "ActChangedNothing",
    "ActHeld",
    "ActRefused",
    "AnswerProgress",
    "InstructionDeclined",
    "InteractionAlreadyAnswered",
    "InteractionAvailable",
    "Knowledge",
    "NarratableFact",
    "NotUnderstood",
    "ObligationOpen",
    "OperationAvailable",
    "OperationalOutcome",
    "ProposedChange",
    "RecordFact",
    "StateValue",
    "ValueNeeded",
]


class OperationAvailable(FrozenModel):
    kind: Literal["operation_available"] = "operation_available"
    workflow: NonEmptyStr
    operation: NonEmptyStr
    summary: str


class RecordFact(FrozenModel):
    kind: Literal["record"] = "record"
    case_ref: CaseRef
    label: str | None = None
    phase: NonEmptyStr
    outcome: dict[str, Any] | None = None


class StateValue(FrozenModel):
    kind: Literal["state_value"] = "state_value"
    case_ref: CaseRef
    field: NonEmptyStr
    value: Any


class ProposedChange(FrozenModel):
    kind: Literal["proposed_change"] = "proposed_change"
    case_ref: CaseRef
    field: NonEmptyStr
    before: Any = None
    after: Any = None


class OperationalOutcome(FrozenModel):
    """Something happened. Must be backed by a receipt block in the same turn."""

    kind: Literal["operational_outcome"] = "operational_outcome"
    receipt_id: ReceiptId
    event_ids: tuple[EventId, ...] = Field(min_length=1)
    status_code: NonEmptyStr


class InteractionAvailable(FrozenModel):
    """A card can be answered. Must be backed by an interaction block in the same turn."""

    kind: Literal["interaction_available"] = "interaction_available"
    interaction_id: InteractionId
    interaction_kind: InteractionKind


class InstructionDeclined(FrozenModel):
    kind: Literal["instruction_declined"] = "instruction_declined"
    case_ref: CaseRef
    interaction_id: InteractionId
    option_id: OptionId
    option_label: str


class ActAwaitingConfirmation(FrozenModel):
    kind: Literal["act_awaiting_confirmation"] = "act_awaiting_confirmation"
    case_ref: CaseRef
    operation: NonEmptyStr


class ActRefused(FrozenModel):
    kind: Literal["act_refused"] = "act_refused"
    case_ref: CaseRef | None = None
    code: NonEmptyStr
    explanation: str


class ActChangedNothing(FrozenModel):
    kind: Literal["act_changed_nothing"] = "act_changed_nothing"
    case_ref: CaseRef
    operation: str | None = None
    explanation: str


class ValueNeeded(FrozenModel):
    kind: Literal["value_needed"] = "value_needed"
    case_ref: CaseRef | None = None
    operation: NonEmptyStr
    arguments: tuple[str, ...] = ()


class NotUnderstood(FrozenModel):
    kind: Literal["not_understood"] = "not_understood"
    words: str


class ActHeld(FrozenModel):
    kind: Literal["act_held"] = "act_held"
    operation: NonEmptyStr
    because: NonEmptyStr


class AnswerProgress(StrEnum):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CLOSED = "closed"


class InteractionAlreadyAnswered(FrozenModel):
    kind: Literal["interaction_already_answered"] = "interaction_already_answered"
    interaction_id: InteractionId
    option_id: OptionId | None = None
    progress: AnswerProgress


class ObligationOpen(FrozenModel):
    kind: Literal["obligation_open"] = "obligation_open"
    case_ref: CaseRef
    obligation_key: NonEmptyStr
    params: dict[str, Any] = Field(default_factory=dict)
    sentence: str | None = None


class Knowledge(FrozenModel):
    kind: Literal["knowledge"] = "knowledge"
    source_id: NonEmptyStr
    text: str


NarratableFact = Annotated[
    OperationAvailable
    | RecordFact
    | StateValue
    | ProposedChange
    | OperationalOutcome
    | InteractionAvailable
    | InstructionDeclined
    | ActAwaitingConfirmation
    | ActRefused
    | ActChangedNothing
    | ValueNeeded
    | NotUnderstood
    | ActHeld
    | InteractionAlreadyAnswered
    | ObligationOpen
    | Knowledge,
    Field(discriminator="kind"),
]
