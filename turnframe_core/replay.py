"""The turn's phase marker and its replay record (the audit half of an assistant turn).

One record per turn, upserted as the turn advances. Records of one conversation are hash-chained:
each stores the digest of the conversation's previous record, so an altered or deleted record is
detected by `verify_chain`.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from turnframe_core import codes
from turnframe_core.blocks import CopyRef
from turnframe_core.canonical import Digest, digest
from turnframe_core.cases import CaseRef
from turnframe_core.commands import CommandOrigin, CommandPolicy
from turnframe_core.derive import derive_replay_token
from turnframe_core.erased import erase_input
from turnframe_core.errors import TurnframeError
from turnframe_core.ids import (
    AccountId,
    CommandId,
    ConversationId,
    EventId,
    InteractionId,
    OutboxId,
    ReplayToken,
    TurnId,
)
from turnframe_core.model import (
    FrozenModel,
    Millis,
    NonEmptyStr,
    Revision,
    Whole,
    without_unset_additions,
)
from turnframe_core.turn import TurnInput
from turnframe_core.understanding import Problem
from turnframe_core.wording import ClaimClass

__all__ = [
    "AwaitingConfirmationOutcome",
    "ChainBreak",
    "CommandOutcome",
    "CommandOutcomeRecord",
    "CommittedOutcome",
    "CopyRender",
    "FailedOutcome",
    "IdempotentReplayOutcome",
    "OutcomeUnknown",
    "PERSONAL_RECORD_FIELDS",
    "SEALED_DIGEST_SCHEME",
    "PolicyDecisionRecord",
    "ProseFinding",
    "ProviderAttempt",
    "RejectedOutcome",
    "ReplayRecord",
    "RevisionConflictOutcome",
    "TargetResolutionRecord",
    "TurnPhase",
    "WorkflowVersion",
    "personal_field_digest",
    "verify_chain",
]

#: The record fields that hold a person's words and values (what the user sent, what was
#: understood from it, the plan built from that, the copy rendered with its values): erasure
#: empties them (`turnframe_core.erasure`).
PERSONAL_RECORD_FIELDS: tuple[str, ...] = (
    "input",
    "understanding",
    "reduction_plan",
    "copy_renders",
)
#: The digest scheme new records are written with: each personal field enters the record's
#: digest through its own digest, so erasure can remove the value and keep the digest
#: (decision 0032). Scheme 1, the records written before, digests the record's JSON whole.
SEALED_DIGEST_SCHEME = 2


class TurnPhase(StrEnum):
    """How far a turn got; the crash-recovery marker."""

    RECEIVED = "received"
    INTERPRETED = "interpreted"
    REDUCED = "reduced"
    EXECUTING = "executing"
    COMMITTED = "committed"
    COMPOSED = "composed"
    DELIVERED = "delivered"
    FAILED = "failed"

    @property
    def is_terminal(self) -> bool:
        return self in (TurnPhase.DELIVERED, TurnPhase.FAILED)

    @property
    def effects_may_exist(self) -> bool:
        return self in (
            TurnPhase.EXECUTING,
            TurnPhase.COMMITTED,
            TurnPhase.COMPOSED,
            TurnPhase.DELIVERED,
        )

    @property
    def rank(self) -> int:
        return _PHASE_ORDER.index(self)


_PHASE_ORDER = list(TurnPhase)


class WorkflowVersion(FrozenModel):
    key: NonEmptyStr
    version: NonEmptyStr


class TargetResolutionRecord(FrozenModel):
    act_id: NonEmptyStr
    resolution: Literal["exact", "ambiguous", "missing"]
    case_ref: CaseRef | None = None
    candidates: tuple[CaseRef, ...] = ()


class PolicyDecisionRecord(FrozenModel):
    command_id: CommandId
    command_type: NonEmptyStr
    policy: CommandPolicy
    origin: CommandOrigin
    allowed: bool
    reason_code: NonEmptyStr


class CommittedOutcome(FrozenModel):
    kind: Literal["committed"] = "committed"
    new_revision: Revision
    event_ids: tuple[EventId, ...]


class IdempotentReplayOutcome(FrozenModel):
    kind: Literal["idempotent_replay"] = "idempotent_replay"
    new_revision: Revision
    event_ids: tuple[EventId, ...]


class RevisionConflictOutcome(FrozenModel):
    kind: Literal["revision_conflict"] = "revision_conflict"
    current_revision: Revision


class RejectedOutcome(FrozenModel):
    kind: Literal["rejected"] = "rejected"
    code: NonEmptyStr
    explanation: str = ""


class FailedOutcome(FrozenModel):
    kind: Literal["failed"] = "failed"
    code: NonEmptyStr


class OutcomeUnknown(FrozenModel):
    """Answer unknown (a timeout after sending, or an executor error that may have landed):
    reconciled, never blindly retried. `error` names an executor's unexpected exception (its
    type and message, shortened)."""

    kind: Literal["outcome_unknown"] = "outcome_unknown"
    attempt_id: NonEmptyStr
    reason: NonEmptyStr = "timeout"
    error: str | None = Field(default=None, max_length=300)

    @model_serializer(mode="wrap")
    def _added_later(self, handler: SerializerFunctionWrapHandler) -> Any:
        return without_unset_additions(handler(self), {"error": None})


class AwaitingConfirmationOutcome(FrozenModel):
    kind: Literal["awaiting_confirmation"] = "awaiting_confirmation"
    interaction_id: InteractionId


CommandOutcome = Annotated[
    CommittedOutcome
    | IdempotentReplayOutcome
    | RevisionConflictOutcome
    | RejectedOutcome
    | FailedOutcome
    | OutcomeUnknown
    | AwaitingConfirmationOutcome,
    Field(discriminator="kind"),
]


class CommandOutcomeRecord(FrozenModel):
    command_id: CommandId
    command_type: NonEmptyStr
    idempotency_key: Digest
    case_ref: CaseRef
    origin: CommandOrigin
    outcome: CommandOutcome


class ProviderAttempt(FrozenModel):
    """One model call: which purpose, which provider and model, how it ended; a model adapter
    adds the digest of the prompt it sent and the tokens the provider counted."""

    attempt: int = Field(ge=1)
    purpose: NonEmptyStr
    provider: NonEmptyStr
    model: NonEmptyStr
    outcome: Literal["succeeded", "failed"]
    code: str | None = None
    request_id: str | None = None
    latency_ms: int | None = Field(default=None, ge=0)
    #: the `sha256:` digest of the prompt template the call was rendered from
    prompt_digest: str | None = Field(default=None, max_length=100)
    input_tokens: Whole | None = None
    output_tokens: Whole | None = None

    @model_serializer(mode="wrap")
    def _added_later(self, handler: SerializerFunctionWrapHandler) -> Any:
        return without_unset_additions(
            handler(self), {"prompt_digest": None, "input_tokens": None, "output_tokens": None}
        )


class ProseFinding(FrozenModel):
    """Why a model-written draft was kept out: which block, which check refused it (`review`:
    the independent reviewer; `guard`: the wording guard; `facts`: it cited facts it was not
    given; `final`: the guard over the composed turn; `moves`: a structured draft's moves could
    not be rendered, `move` naming the one at fault when one is), the code and rule, and what
    replaced the draft (`rewrite`: the narrator's second draft; `server_copy`: the server's own
    sentence).

    The record names the flagged words by `span` (offsets into the draft as the guard reads it:
    NFKC-normalised, lower-cased, emphasis marks dropped), never by the words themselves, nor by
    a digest a guess could be checked against: a claim nothing backs leaves no trace of its
    wording in the record."""

    block: Literal["answer", "transition"]
    question_id: str | None = None
    check: Literal["review", "guard", "facts", "final", "moves"]
    code: NonEmptyStr
    rule: NonEmptyStr
    claim_class: ClaimClass | None = None
    span: tuple[int, int] | None = None
    replaced_by: Literal["rewrite", "server_copy"]
    #: the index of the refused move in its draft (`moves` findings)
    move: int | None = Field(default=None, ge=0)

    @model_serializer(mode="wrap")
    def _added_later(self, handler: SerializerFunctionWrapHandler) -> Any:
        return without_unset_additions(handler(self), {"move": None})


class CopyRender(FrozenModel):
    """One sentence of server copy a turn rendered: the template and parameters it was rendered
    from, the text it gave and the reference its block stores. Replay shows the stored text; a
    re-render compares it with what today's copy writes from the same template and parameters."""

    template_id: NonEmptyStr
    params: dict[str, Any] = Field(default_factory=dict)
    text: str
    copy_ref: CopyRef


class ReplayRecord(FrozenModel):
    """Everything needed to answer the audit questions about one turn, without re-running it."""

    turn_id: TurnId
    conversation_id: ConversationId
    account_id: AccountId
    replay_token: ReplayToken
    phase: TurnPhase
    recorded_at: Millis
    input: TurnInput
    previous_digest: Digest | None = None
    loaded_cases: tuple[CaseRef, ...] = ()
    workflow_versions: tuple[WorkflowVersion, ...] = ()
    understanding: dict[str, Any] | None = None
    understanding_hash: Digest | None = None
    #: why a proposed understanding was refused (codes and paths, never values)
    understanding_problems: tuple[Problem, ...] = ()
    target_resolutions: tuple[TargetResolutionRecord, ...] = ()
    reduction_plan: dict[str, Any] | None = None
    plan_hash: Digest | None = None
    policy_decisions: tuple[PolicyDecisionRecord, ...] = ()
    command_outcomes: tuple[CommandOutcomeRecord, ...] = ()
    interactions_created: tuple[InteractionId, ...] = ()
    event_ids: tuple[EventId, ...] = ()
    outbox_ids: tuple[OutboxId, ...] = ()
    response_block_ids: tuple[str, ...] = ()
    provider_attempts: tuple[ProviderAttempt, ...] = ()
    #: claim-guard codes of model prose that was discarded (server copy replaced it)
    claim_violations: tuple[str, ...] = ()
    #: what the review and the wording guard kept out of the reply, and what replaced it
    prose_findings: tuple[ProseFinding, ...] = ()
    #: the card this turn won (moved to `resolving`): recovery settles it, and only it
    claimed_interaction: InteractionId | None = None
    failure_code: str | None = None
    #: the server copy the turn rendered (template, parameters, text, reference)
    copy_renders: tuple[CopyRender, ...] = ()
    #: the digest of each returned block, in `response_block_ids` order (the chain vouches for
    #: the reply's content through them)
    response_block_hashes: tuple[Digest, ...] = ()
    #: the digest of each event of `event_ids` as committed (its sequence left out)
    event_digests: tuple[Digest, ...] = ()
    #: the digest of each card of `interactions_created` as stored, its lifecycle left out
    #: (`Interaction.content_digest`): the chain vouches for what a click on it runs
    interaction_digests: tuple[Digest, ...] = ()
    #: the digest of each returned block's erased form, each committed event's and each
    #: created card's (`turnframe_core.erasure`): once the turn is erased, the chain still
    #: vouches for what its documents keep
    erased_block_hashes: tuple[Digest, ...] = ()
    erased_event_digests: tuple[Digest, ...] = ()
    erased_interaction_digests: tuple[Digest, ...] = ()
    #: how `digest()` is taken: 1, over the record's canonical JSON; 2 (sealed), each personal
    #: field through its own digest
    digest_scheme: Literal[1, 2] = 1
    #: once erased: the digest each personal field held (sealed), or the whole record's
    #: (`"record"`, a scheme-1 record); the fields themselves are emptied
    erased: dict[str, Digest] = Field(default_factory=dict)
    #: when the record was erased
    erased_at: Millis | None = None

    @model_validator(mode="after")
    def _token_is_derived(self) -> ReplayRecord:
        if self.replay_token != derive_replay_token(self.turn_id):
            raise ValueError("replay_token is not derived from turn_id")
        if (self.input.account_id, self.input.conversation_id) != (
            self.account_id,
            self.conversation_id,
        ):
            raise ValueError("the recorded input belongs to another account or conversation")
        if bool(self.erased) != (self.erased_at is not None):
            raise ValueError("a record keeps erased digests exactly when it was erased")
        return self

    @model_serializer(mode="wrap")
    def _added_later(self, handler: SerializerFunctionWrapHandler) -> Any:
        return without_unset_additions(
            handler(self),
            {
                "understanding_problems": (),
                "prose_findings": (),
                "claimed_interaction": None,
                "copy_renders": (),
                "response_block_hashes": (),
                "event_digests": (),
                "interaction_digests": (),
                "erased_block_hashes": (),
                "erased_event_digests": (),
                "erased_interaction_digests": (),
                "digest_scheme": 1,
                "erased": {},
                "erased_at": None,
            },
        )

    def digest(self) -> str:
        """Digest of this record's canonical JSON (what the next record of the chain stores),
        computed once per instance: the record is frozen, and the chain link of a final record
        and the next turn's `previous_digest` both ask for it."""
        return self.cached("digest", self._digest)

    def _digest(self) -> str:
        if self.digest_scheme == 1:
            # erased before records were sealed: only its whole digest is left (the audit says
            # that its content can no longer be checked)
            kept = self.erased.get("record")
            return kept if kept is not None and self.erased_at is not None else digest(self)
        data = self.model_dump(mode="json")
        data.pop("erased", None)
        data.pop("erased_at", None)
        sealed = {
            # a kept digest stands for a field only while the field holds what erasure leaves:
            # words put back, or a digest kept beside words, are digested as they are
            name: kept
            if (kept := self.erased.get(name)) is not None and self.holds_erased(name)
            else personal_field_digest(data, name)
            for name in PERSONAL_RECORD_FIELDS
        }
        for name in PERSONAL_RECORD_FIELDS:
            data.pop(name, None)
        return digest({**data, "sealed": sealed})

    def holds_erased(self, name: str) -> bool:
        """Whether the personal field `name` holds what erasure leaves in it (and the record
        was erased)."""
        if self.erased_at is None:
            return False
        if name == "input":
            return self.input == erase_input(self.input)
        if name == "copy_renders":
            return not self.copy_renders
        return getattr(self, name) is None

    def advanced(self, phase: TurnPhase, *, at: int, **changes: Any) -> ReplayRecord:
        """This record at a later phase (phases never go back, except into `failed`)."""
        if self.phase.is_terminal and phase is not self.phase:
            raise TurnframeError(f"replay record is already {self.phase.value}")
        if phase.rank < self.phase.rank and phase is not TurnPhase.FAILED:
            raise TurnframeError(f"replay record cannot go back to {phase.value}")
        # Shallow: already-validated parts pass through; only the changes are validated.
        data = {name: getattr(self, name) for name in type(self).model_fields}
        # Never earlier than this record: a turn's records, and so a conversation's, keep order.
        data.update(changes, phase=phase, recorded_at=max(at, self.recorded_at))
        return ReplayRecord.model_validate(data)

    def pending_reconciliations(self) -> tuple[str, ...]:
        seen: list[str] = []
        for record in self.command_outcomes:
            if isinstance(record.outcome, OutcomeUnknown) and record.outcome.attempt_id not in seen:
                seen.append(record.outcome.attempt_id)
        return tuple(seen)


def personal_field_digest(data: dict[str, Any], name: str) -> str:
    """The digest a sealed record's digest takes of its personal field `name`, from the record's
    JSON form `data` (a field left out while it holds its default digests as null)."""
    return digest({name: data.get(name)})


class ChainBreak(FrozenModel):
    code: str
    turn_id: str
    position: int


def verify_chain(records: Sequence[ReplayRecord]) -> list[ChainBreak]:
    """Check one conversation's records, oldest first: each must cite its predecessor's digest and
    the first must cite none. Every break is reported (an edit, a deletion or a reorder)."""
    breaks: list[ChainBreak] = []
    previous: ReplayRecord | None = None
    for position, record in enumerate(records):
        expected = previous.digest() if previous is not None else None
        if record.previous_digest != expected:
            breaks.append(
                ChainBreak(
                    code=codes.REPLAY_CHAIN_BROKEN, turn_id=record.turn_id, position=position
                )
            )
        previous = record
    return breaks
