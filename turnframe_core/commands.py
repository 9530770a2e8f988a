"""Commands: the envelope, where authority comes from, what a command risks, and what it needs.

`CommandOrigin` has no variant for "the model proposed it": a model's proposal becomes a command
only through a user's direct safe act, a confirmed card, an internal policy or a verified callback.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, model_validator

from turnframe_core import codes
from turnframe_core.canonical import Digest, digest
from turnframe_core.cases import CaseRef
from turnframe_core.errors import TurnframeError
from turnframe_core.ids import AccountId, BatchId, CommandId, InteractionId, TurnId
from turnframe_core.interactions import (
    AcceptedAnswer,
    ActionClass,
    InteractionKind,
    ResolutionChannel,
)
from turnframe_core.model import FrozenModel, NonEmptyStr

__all__ = [
    "AtomicityScope",
    "ClaimMode",
    "CommandBatch",
    "CommandEnvelope",
    "CommandOrigin",
    "CommandPolicy",
    "ConfirmationPolicy",
    "ConfirmedInteraction",
    "DirectSafeUserAct",
    "ExplicitGroup",
    "ExternalCallback",
    "ExternalSaga",
    "IdempotencyKeyMismatch",
    "InternalPolicy",
    "PerCase",
    "PerCommand",
    "RiskClass",
    "ScopeViolation",
    "derive_idempotency_key",
    "origin_for_answer",
    "origin_is_trusted",
    "origin_satisfies",
]

# --- origins ------------------------------------------------------------------------------------


class DirectSafeUserAct(FrozenModel):
    """The user asked for it in words; never trusted, enough only for low risk."""

    kind: Literal["direct_safe_user_act"] = "direct_safe_user_act"
    evidence_digest: Digest


class ConfirmedInteraction(FrozenModel):
    """The user answered a persisted card; trusted only for a click on an authorizing option."""

    kind: Literal["confirmed_interaction"] = "confirmed_interaction"
    interaction_id: InteractionId
    payload_hash: Digest
    interaction_kind: InteractionKind
    action_class: ActionClass
    channel: ResolutionChannel


class InternalPolicy(FrozenModel):
    """The server's own policy decided it (e.g. a scheduled expiry)."""

    kind: Literal["internal_policy"] = "internal_policy"
    policy_key: NonEmptyStr


class ExternalCallback(FrozenModel):
    """An outside system's answer; trusted only once its signature was verified."""

    kind: Literal["external_callback"] = "external_callback"
    callback_id: NonEmptyStr
    signature_verified: bool


CommandOrigin = Annotated[
    DirectSafeUserAct | ConfirmedInteraction | InternalPolicy | ExternalCallback,
    Field(discriminator="kind"),
]


def origin_is_trusted(origin: CommandOrigin) -> bool:
    if isinstance(origin, ConfirmedInteraction):
        return origin.action_class.authorizes_commands and origin.channel is ResolutionChannel.CLICK
    if isinstance(origin, InternalPolicy):
        return True
    if isinstance(origin, ExternalCallback):
        return origin.signature_verified
    return False


def origin_for_answer(answer: AcceptedAnswer) -> ConfirmedInteraction:
    """The origin a card answer gives the commands it authorizes or applies."""
    return ConfirmedInteraction(
        interaction_id=answer.interaction_id,
        payload_hash=answer.payload_hash,
        interaction_kind=answer.interaction_kind,
        action_class=answer.action_class,
        channel=answer.channel,
    )


# --- policy -------------------------------------------------------------------------------------


class RiskClass(StrEnum):
    """Ordered: read_only < reversible_low_risk < … < external_regulated."""

    READ_ONLY = "read_only"
    REVERSIBLE_LOW_RISK = "reversible_low_risk"
    SENSITIVE_DATA_CHANGE = "sensitive_data_change"
    DESTRUCTIVE = "destructive"
    IRREVERSIBLE = "irreversible"
    EXTERNAL_REGULATED = "external_regulated"

    @property
    def rank(self) -> int:
        return _RISK_ORDER.index(self)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, RiskClass):
            return NotImplemented
        return self.rank < other.rank

    def __le__(self, other: object) -> bool:
        if not isinstance(other, RiskClass):
            return NotImplemented
        return self.rank <= other.rank

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, RiskClass):
            return NotImplemented
        return self.rank > other.rank

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, RiskClass):
            return NotImplemented
        return self.rank >= other.rank

    @property
    def needs_trusted_origin(self) -> bool:
        return self > RiskClass.REVERSIBLE_LOW_RISK


_RISK_ORDER = list(RiskClass)


class ConfirmationPolicy(StrEnum):
    NONE = "none"
    REVIEW_CARD = "review_card"
    EXPLICIT_CLICK = "explicit_click"
    REAUTHENTICATION = "reauthentication"
    QUALIFIED_SIGNATURE = "qualified_signature"
    HUMAN_PROFESSIONAL_REVIEW = "human_professional_review"

    @property
    def interaction_kind(self) -> InteractionKind | None:
        """The card that satisfies this policy; None when no card can (or none is needed)."""
        return _CONFIRMATION_CARD[self]


_CONFIRMATION_CARD: dict[ConfirmationPolicy, InteractionKind | None] = {
    ConfirmationPolicy.NONE: None,
    ConfirmationPolicy.REVIEW_CARD: InteractionKind.REVIEW_CHANGES,
    ConfirmationPolicy.EXPLICIT_CLICK: InteractionKind.CONFIRM_COMMAND,
    ConfirmationPolicy.REAUTHENTICATION: InteractionKind.REAUTHENTICATE,
    ConfirmationPolicy.QUALIFIED_SIGNATURE: InteractionKind.EXTERNAL_SIGNATURE,
    ConfirmationPolicy.HUMAN_PROFESSIONAL_REVIEW: None,
}


class PerCommand(FrozenModel):
    kind: Literal["per_command"] = "per_command"


class PerCase(FrozenModel):
    kind: Literal["per_case"] = "per_case"


class ExplicitGroup(FrozenModel):
    kind: Literal["explicit_group"] = "explicit_group"
    group: NonEmptyStr


class ExternalSaga(FrozenModel):
    """The command leaves an outbox row in the commit bundle; a relay carries it out."""

    kind: Literal["external_saga"] = "external_saga"
    saga: NonEmptyStr


AtomicityScope = Annotated[
    PerCommand | PerCase | ExplicitGroup | ExternalSaga, Field(discriminator="kind")
]


def scope_key(scope: AtomicityScope) -> str:
    """A stable string for a scope (used in derived batch ids)."""
    if isinstance(scope, ExplicitGroup):
        return f"explicit_group:{scope.group}"
    if isinstance(scope, ExternalSaga):
        return f"external_saga:{scope.saga}"
    return scope.kind


class ClaimMode(StrEnum):
    SERVER_RECEIPT_ONLY = "server_receipt_only"
    EVENT_REFERENCED_PARAPHRASE = "event_referenced_paraphrase"
    FREE_EXPLANATION = "free_explanation"


class CommandPolicy(FrozenModel):
    risk: RiskClass = RiskClass.IRREVERSIBLE
    confirmation: ConfirmationPolicy = ConfirmationPolicy.EXPLICIT_CLICK
    atomicity: AtomicityScope = Field(default_factory=PerCase)
    claim_mode: ClaimMode = ClaimMode.SERVER_RECEIPT_ONLY

    @classmethod
    def conservative(cls) -> CommandPolicy:
        """The default for any command a workflow does not know: irreversible, explicit click."""
        return cls()

    @classmethod
    def read_only(cls) -> CommandPolicy:
        return cls(
            risk=RiskClass.READ_ONLY,
            confirmation=ConfirmationPolicy.NONE,
            atomicity=PerCommand(),
            claim_mode=ClaimMode.FREE_EXPLANATION,
        )

    @classmethod
    def low_risk(cls) -> CommandPolicy:
        return cls(
            risk=RiskClass.REVERSIBLE_LOW_RISK,
            confirmation=ConfirmationPolicy.NONE,
            atomicity=PerCase(),
            claim_mode=ClaimMode.EVENT_REFERENCED_PARAPHRASE,
        )

    @property
    def requires_trusted_origin(self) -> bool:
        return self.risk.needs_trusted_origin or self.confirmation is not ConfirmationPolicy.NONE


def _satisfies_confirmation(origin: CommandOrigin, policy: ConfirmationPolicy) -> bool:
    if policy is ConfirmationPolicy.NONE:
        return True
    verified_callback = isinstance(origin, ExternalCallback) and origin.signature_verified
    if policy is ConfirmationPolicy.HUMAN_PROFESSIONAL_REVIEW:
        # Never the user's own click.
        return isinstance(origin, InternalPolicy) or verified_callback
    if verified_callback and policy in (
        ConfirmationPolicy.REAUTHENTICATION,
        ConfirmationPolicy.QUALIFIED_SIGNATURE,
    ):
        return True
    if not isinstance(origin, ConfirmedInteraction):
        return False
    if origin.channel is not ResolutionChannel.CLICK or not origin.action_class.authorizes_commands:
        return False
    if policy in (ConfirmationPolicy.REVIEW_CARD, ConfirmationPolicy.EXPLICIT_CLICK):
        return origin.interaction_kind in (
            InteractionKind.CONFIRM_COMMAND,
            InteractionKind.REVIEW_CHANGES,
        )
    return origin.interaction_kind is policy.interaction_kind


def origin_satisfies(origin: CommandOrigin, policy: CommandPolicy) -> bool:
    """Two gates: a risky command needs a trusted origin; then the confirmation it names."""
    if policy.risk.needs_trusted_origin and not origin_is_trusted(origin):
        return False
    return _satisfies_confirmation(origin, policy.confirmation)


# --- envelope -----------------------------------------------------------------------------------


def derive_idempotency_key(
    *,
    account_id: str,
    turn_id: str,
    case_ref: CaseRef,
    origin: CommandOrigin,
    command_type: str,
    payload: dict[str, Any],
) -> str:
    """Digest of {account, turn, case_ref (with the expected revision), origin, command}.

    The same turn replayed reproduces the key; a command re-planned against a newer revision is a
    new command with a new key.
    """
    return digest(
        {
            "domain": "turnframe.idempotency.v1",
            "account_id": account_id,
            "turn_id": turn_id,
            "case_ref": case_ref,
            "origin": origin,
            "command": {"command_type": command_type, "payload": payload},
        }
    )


class IdempotencyKeyMismatch(TurnframeError):
    code = codes.COMMAND_IDEMPOTENCY_KEY_MISMATCH


class ScopeViolation(TurnframeError):
    code = codes.COMMAND_SCOPE_VIOLATION


_DERIVED = object()  # private marker: `build` derived the key itself


class CommandEnvelope(FrozenModel):
    """One typed command bound to a case revision, an origin and its idempotency key.

    The key is derived, never chosen: an envelope whose key does not match its content is refused.
    """

    command_id: CommandId
    turn_id: TurnId
    account_id: AccountId
    case_ref: CaseRef
    idempotency_key: Digest
    origin: CommandOrigin
    command_type: NonEmptyStr
    payload: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _key_matches(self, info: ValidationInfo) -> CommandEnvelope:
        if info.context is not None and info.context.get("derived_key") is _DERIVED:
            return self  # built by `build`, which derived the key from these very fields
        if self.checked():
            return self  # this very instance passed already (placed in a batch, a journal entry)
        expected = derive_idempotency_key(
            account_id=self.account_id,
            turn_id=self.turn_id,
            case_ref=self.case_ref,
            origin=self.origin,
            command_type=self.command_type,
            payload=self.payload,
        )
        if self.idempotency_key != expected:
            raise IdempotencyKeyMismatch("idempotency_key is not derived from this command")
        self.mark_checked()
        return self

    @classmethod
    def build(
        cls,
        *,
        command_id: str,
        turn_id: str,
        account_id: str,
        case_ref: CaseRef,
        origin: CommandOrigin,
        command_type: str,
        payload: dict[str, Any] | None = None,
    ) -> CommandEnvelope:
        body = payload or {}
        fields = {
            "command_id": command_id,
            "turn_id": turn_id,
            "account_id": account_id,
            "case_ref": case_ref,
            "origin": origin,
            "command_type": command_type,
            "payload": body,
        }
        envelope = cls.model_validate(
            {**fields, "idempotency_key": "sha256:" + "0" * 64}, context={"derived_key": _DERIVED}
        )
        key = derive_idempotency_key(
            account_id=envelope.account_id,
            turn_id=envelope.turn_id,
            case_ref=envelope.case_ref,
            origin=envelope.origin,
            command_type=envelope.command_type,
            payload=envelope.payload,
        )
        built = envelope.model_copy(update={"idempotency_key": key})
        built.mark_checked()  # its key was derived from these very fields just now
        return built

    def same_command(self, other: CommandEnvelope) -> bool:
        """Same case, type and payload: what a reused idempotency key must also match."""
        return (
            self.case_ref == other.case_ref
            and self.command_type == other.command_type
            and self.payload == other.payload
        )


class CommandBatch(FrozenModel):
    """Commands that commit together. A per_case batch targets exactly one case."""

    batch_id: BatchId
    scope: AtomicityScope
    envelopes: tuple[CommandEnvelope, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _scope_holds(self) -> CommandBatch:
        accounts = {e.account_id for e in self.envelopes}
        if len(accounts) != 1:
            raise ScopeViolation("a batch belongs to one account")
        if isinstance(self.scope, PerCase | ExternalSaga):
            keys = {(e.case_ref.workflow, e.case_ref.case_id) for e in self.envelopes}
            if len(keys) != 1:
                raise ScopeViolation(f"a {self.scope.kind} batch targets a single case")
        if isinstance(self.scope, PerCommand) and len(self.envelopes) != 1:
            raise ScopeViolation("a per_command batch holds one command")
        ids = [e.command_id for e in self.envelopes]
        if len(ids) != len(set(ids)):
            raise ScopeViolation("a batch holds each command once")
        return self
