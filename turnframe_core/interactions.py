"""Interactions (cards): kinds, options with server-stored actions, the status machine, revision
binding, payload validation and the validation of a client's answer.

A card's options carry the action the server will take; the client only ever sees
`InteractionOptionView` (no action) and answers with ids. The server reads the stored action.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Final, Literal

from pydantic import Field, model_validator

from turnframe_core import codes
from turnframe_core._input import InputModel
from turnframe_core.canonical import Digest, digest
from turnframe_core.cases import CaseRef
from turnframe_core.copytext import Localized
from turnframe_core.errors import TurnframeError
from turnframe_core.ids import AccountId, CommandId, ConversationId, InteractionId, OptionId, TurnId
from turnframe_core.model import FrozenModel, Millis, NonEmptyStr, Revision
from turnframe_core.understanding import Constraint, ProposedAct

__all__ = [
    "AcceptedAnswer",
    "ActionClass",
    "AlreadyAnswered",
    "ApplyOperation",
    "CardPurpose",
    "ConfirmCommands",
    "ConfirmsAct",
    "Custom",
    "DeclineAndRecord",
    "DeclineCommands",
    "DefersAct",
    "Dismiss",
    "FreeformForbidden",
    "FreeformNotAllowed",
    "FreeformOptional",
    "FreeformPolicy",
    "FreeformRequired",
    "FreeformRequiredMissing",
    "FreeformTooLong",
    "IllegalTransition",
    "Interaction",
    "InteractionExpired",
    "InteractionKind",
    "InteractionNotActive",
    "InteractionNotFound",
    "InteractionOption",
    "InteractionOptionView",
    "InteractionPayload",
    "InteractionRejected",
    "InteractionResponse",
    "InteractionStatus",
    "InteractionView",
    "InvalidInteraction",
    "MeetsRequirement",
    "OptionStyle",
    "PayloadCorrupt",
    "ResolutionChannel",
    "ResolveClarification",
    "ReviewEntry",
    "SelectTarget",
    "StaleInteraction",
    "StoredAction",
    "TextResolution",
    "UnknownOption",
    "can_transition",
    "validate_answer",
    "validate_payload_for",
]


class InteractionKind(StrEnum):
    BOOLEAN = "boolean"
    SINGLE_SELECT = "single_select"
    FREEFORM = "freeform"
    REVIEW_CHANGES = "review_changes"
    CONFIRM_COMMAND = "confirm_command"
    SELECT_TARGET = "select_target"
    RESOLVE_VALIDATION_ERROR = "resolve_validation_error"
    REAUTHENTICATE = "reauthenticate"
    EXTERNAL_SIGNATURE = "external_signature"

    @property
    def authorizes_commands(self) -> bool:
        """Cards of these kinds grant authority; they are never resolved from typed text."""
        return self in _AUTHORIZING_KINDS


_AUTHORIZING_KINDS = frozenset(
    {
        InteractionKind.CONFIRM_COMMAND,
        InteractionKind.REVIEW_CHANGES,
        InteractionKind.REAUTHENTICATE,
        InteractionKind.EXTERNAL_SIGNATURE,
    }
)


class InteractionStatus(StrEnum):
    ACTIVE = "active"
    RESOLVING = "resolving"
    RESOLVED = "resolved"
    FAILED = "failed"
    DECLINED = "declined"
    DISMISSED = "dismissed"
    INVALIDATED = "invalidated"
    EXPIRED = "expired"

    @property
    def is_open(self) -> bool:
        """Open cards hold the one-blocking-card-per-case slot."""
        return self in (InteractionStatus.ACTIVE, InteractionStatus.RESOLVING)

    @property
    def is_terminal(self) -> bool:
        return not self.is_open


_LEGAL_TRANSITIONS: dict[InteractionStatus, frozenset[InteractionStatus]] = {
    InteractionStatus.ACTIVE: frozenset(
        {
            InteractionStatus.RESOLVING,
            InteractionStatus.DECLINED,
            InteractionStatus.DISMISSED,
            InteractionStatus.INVALIDATED,
            InteractionStatus.EXPIRED,
        }
    ),
    InteractionStatus.RESOLVING: frozenset(
        {InteractionStatus.RESOLVED, InteractionStatus.FAILED, InteractionStatus.ACTIVE}
    ),
}


def can_transition(current: InteractionStatus, target: InteractionStatus) -> bool:
    """The status machine. Terminal statuses never move again (never reactivate)."""
    return target in _LEGAL_TRANSITIONS.get(current, frozenset())


class ActionClass(StrEnum):
    CONFIRMS_COMMANDS = "confirms_commands"
    APPLIES_OPERATION = "applies_operation"
    NO_COMMANDS = "no_commands"

    @property
    def authorizes_commands(self) -> bool:
        return self is not ActionClass.NO_COMMANDS


class ResolutionChannel(StrEnum):
    """How an answer arrived: a click on a stored option, or text a model read as an answer."""

    CLICK = "click"
    TEXT = "text"


class TextResolution(StrEnum):
    NEVER = "never"
    LOW_RISK_TEXT = "low_risk_text"


class OptionStyle(StrEnum):
    PRIMARY = "primary"
    SECONDARY = "secondary"
    DANGER = "danger"


# --- stored actions (server side only) ----------------------------------------------------------


class ConfirmCommands(FrozenModel):
    """Run the commands journaled with this card (awaiting confirmation)."""

    kind: Literal["confirm_commands"] = "confirm_commands"
    command_ids: tuple[CommandId, ...] = Field(min_length=1)


class ApplyOperation(FrozenModel):
    """Compile this operation on click; free text may fill only `freeform_argument`."""

    kind: Literal["apply_operation"] = "apply_operation"
    operation: NonEmptyStr
    arguments: dict[str, Any] = Field(default_factory=dict)
    freeform_argument: str | None = None


class DeclineCommands(FrozenModel):
    kind: Literal["decline_commands"] = "decline_commands"


class DeclineAndRecord(FrozenModel):
    """Drop the pending commands and record one bookkeeping operation."""

    kind: Literal["decline_and_record"] = "decline_and_record"
    operation: NonEmptyStr
    arguments: dict[str, Any] = Field(default_factory=dict)


class SelectTarget(FrozenModel):
    kind: Literal["select_target"] = "select_target"
    case_ref: CaseRef


class ResolveClarification(FrozenModel):
    kind: Literal["resolve_clarification"] = "resolve_clarification"
    answer_key: NonEmptyStr


class Dismiss(FrozenModel):
    kind: Literal["dismiss"] = "dismiss"


class Custom(FrozenModel):
    kind: Literal["custom"] = "custom"
    key: NonEmptyStr
    payload: dict[str, Any] = Field(default_factory=dict)


StoredAction = Annotated[
    ConfirmCommands
    | ApplyOperation
    | DeclineCommands
    | DeclineAndRecord
    | SelectTarget
    | ResolveClarification
    | Dismiss
    | Custom,
    Field(discriminator="kind"),
]


def action_class(action: StoredAction) -> ActionClass:
    if isinstance(action, ConfirmCommands):
        return ActionClass.CONFIRMS_COMMANDS
    if isinstance(action, ApplyOperation):
        return ActionClass.APPLIES_OPERATION
    return ActionClass.NO_COMMANDS


def action_declines(action: StoredAction) -> bool:
    return isinstance(action, DeclineCommands | DeclineAndRecord | Dismiss)


# --- free text policy ---------------------------------------------------------------------------


class FreeformForbidden(FrozenModel):
    kind: Literal["forbidden"] = "forbidden"


class FreeformOptional(FrozenModel):
    kind: Literal["optional"] = "optional"
    max_len: int = Field(default=500, ge=1, le=10_000)


class FreeformRequired(FrozenModel):
    kind: Literal["required"] = "required"
    max_len: int = Field(default=500, ge=1, le=10_000)


FreeformPolicy = Annotated[
    FreeformForbidden | FreeformOptional | FreeformRequired, Field(discriminator="kind")
]


# --- options, payload, record -------------------------------------------------------------------


class InteractionOption(FrozenModel):
    """One legal answer. `action` is server-stored and never leaves the server."""

    option_id: OptionId
    #: the label as shown; a workflow building a card may give a copy reference, which the
    #: runtime renders in the turn's locale before the card is persisted
    label: NonEmptyStr | Localized
    style: OptionStyle = OptionStyle.SECONDARY
    action: StoredAction
    freeform: FreeformPolicy = Field(default_factory=FreeformForbidden)

    @property
    def action_class(self) -> ActionClass:
        return action_class(self.action)

    @property
    def declines(self) -> bool:
        return action_declines(self.action)

    def view(self) -> InteractionOptionView:
        return InteractionOptionView(
            option_id=self.option_id,
            label=_shown(self.label),
            style=self.style,
            freeform=self.freeform.kind,
        )


class InteractionOptionView(FrozenModel):
    """What a client may see of an option: never its action."""

    option_id: OptionId
    label: NonEmptyStr
    style: OptionStyle = OptionStyle.SECONDARY
    freeform: Literal["forbidden", "optional", "required"] = "forbidden"


class ReviewEntry(FrozenModel):
    """One line of a proposed change, as shown: field label and before/after display values."""

    field: NonEmptyStr
    label: NonEmptyStr
    before: str | None = None
    after: str | None = None


# --- why the runtime raised a card (server side only) -------------------------------------------


class ConfirmsAct(FrozenModel):
    """A confirmation card: the act whose journaled commands its confirm option runs."""

    kind: Literal["confirms_act"] = "confirms_act"
    act_id: NonEmptyStr


class DefersAct(FrozenModel):
    """A selection card: the act it holds until the user names its case, with the constraints of
    the turn that raised it (they still bind the act when it runs)."""

    kind: Literal["defers_act"] = "defers_act"
    act: ProposedAct
    constraints: tuple[Constraint, ...] = ()


class MeetsRequirement(FrozenModel):
    """A follow-up card raised for a workflow view's blocking requirement."""

    kind: Literal["meets_requirement"] = "meets_requirement"
    requirement_key: NonEmptyStr


CardPurpose = Annotated[ConfirmsAct | DefersAct | MeetsRequirement, Field(discriminator="kind")]


class InteractionPayload(FrozenModel):
    """What a card shows and what each option does. Immutable: a different card is a new id.

    `purpose` is the runtime's own record of why it raised the card; `metadata` is the domain's.
    """

    title: NonEmptyStr | Localized
    body: str | Localized | None = None
    options: tuple[InteractionOption, ...] = Field(min_length=1)
    review_entries: tuple[ReviewEntry, ...] = ()
    freeform_prompt: str | Localized | None = None
    purpose: CardPurpose | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    def hash(self) -> str:
        """The payload's digest. A payload without a purpose hashes exactly as it did before
        `purpose` existed, so cards stored earlier keep their hash."""
        data = self.model_dump(mode="json")
        if data["purpose"] is None:
            del data["purpose"]
        return digest(data)

    def copy_references(self) -> list[tuple[str, Localized]]:
        """The copy references still to render, by field (`title`, `body`, `freeform_prompt`,
        `options.<option id>.label`); a persisted card has none."""
        found: list[tuple[str, Localized]] = [
            (name, value)
            for name in ("title", "body", "freeform_prompt")
            if isinstance(value := getattr(self, name), Localized)
        ]
        found.extend(
            (f"options.{option.option_id}.label", option.label)
            for option in self.options
            if isinstance(option.label, Localized)
        )
        return found

    def option(self, option_id: str) -> InteractionOption | None:
        for option in self.options:
            if option.option_id == option_id:
                return option
        return None

    def confirmed_command_ids(self) -> tuple[str, ...]:
        """The journaled commands this card's options confirm, in option order."""
        return tuple(
            command_id
            for option in self.options
            if isinstance(option.action, ConfirmCommands)
            for command_id in option.action.command_ids
        )


def _shown(text: str | Localized | None) -> Any:
    """A persisted card's text (a card holding a copy reference is never persisted)."""
    if isinstance(text, Localized):
        raise InvalidInteraction("a card shows rendered text, never a copy reference")
    return text


class InvalidInteraction(TurnframeError):
    """A card that could not be answered as specified; nothing is persisted."""

    code = codes.INTERACTION_INVALID_SPEC


def validate_payload_for(kind: InteractionKind, payload: InteractionPayload) -> list[str]:
    """Why a payload cannot serve as a card of `kind` (empty list: it can)."""
    problems: list[str] = []
    ids = [option.option_id for option in payload.options]
    if len(ids) != len(set(ids)):
        problems.append("option ids are not unique")
    authorizing = [o for o in payload.options if o.action_class.authorizes_commands]
    declining = [o for o in payload.options if o.declines]
    if kind is InteractionKind.BOOLEAN and len(payload.options) != 2:
        problems.append("a boolean card has exactly two options")
    if kind in (InteractionKind.CONFIRM_COMMAND, InteractionKind.REVIEW_CHANGES):
        if not authorizing:
            problems.append(f"a {kind.value} card needs an option that authorizes commands")
        if not declining:
            problems.append(f"a {kind.value} card needs an option that declines")
    if kind is InteractionKind.REVIEW_CHANGES and not payload.review_entries:
        problems.append("a review_changes card needs at least one review entry")
    if kind in (InteractionKind.REAUTHENTICATE, InteractionKind.EXTERNAL_SIGNATURE) and not (
        authorizing
    ):
        problems.append(f"a {kind.value} card needs an option that authorizes commands")
    if kind is InteractionKind.FREEFORM:
        if not payload.freeform_prompt:
            problems.append("a freeform card needs a prompt")
        if not any(isinstance(o.freeform, FreeformRequired) for o in payload.options):
            problems.append("a freeform card needs an option that requires free text")
    if kind is InteractionKind.SELECT_TARGET and any(
        o.action_class.authorizes_commands for o in payload.options
    ):
        problems.append("a select_target card never authorizes commands")
    return problems


#: the fields of a card that move after it is stored (`Interaction.content_digest` leaves them out)
_LIFECYCLE: Final[set[str]] = {
    "status",
    "resolved_at",
    "resolved_option_id",
    "resolution_event_ids",
}


class Interaction(FrozenModel):
    """A persisted card. The payload and its hash never change; only lifecycle fields move."""

    interaction_id: InteractionId
    account_id: AccountId
    conversation_id: ConversationId
    case_ref: CaseRef
    kind: InteractionKind
    blocking: bool = True
    revision_independent: bool = False
    text_resolution: TextResolution = TextResolution.NEVER
    payload: InteractionPayload
    payload_hash: Digest
    status: InteractionStatus = InteractionStatus.ACTIVE
    created_by_turn: TurnId
    created_at: Millis
    expires_at: Millis | None = None
    resolved_at: Millis | None = None
    resolved_option_id: OptionId | None = None
    resolution_event_ids: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _check(self) -> Interaction:
        problems = validate_payload_for(self.kind, self.payload)
        if self.payload.copy_references():
            problems.append("a card shows rendered text, never a copy reference")
        if self.payload_hash != self.payload.hash():
            problems.append("payload_hash does not match the payload")
        if self.text_resolution is not TextResolution.NEVER and self.kind.authorizes_commands:
            problems.append("a card that authorizes commands is never resolved from text")
        if self.expires_at is not None and self.expires_at <= self.created_at:
            problems.append("expires_at must be after created_at")
        if problems:
            raise InvalidInteraction("; ".join(problems))
        return self

    @classmethod
    def create(
        cls,
        *,
        interaction_id: str,
        account_id: str,
        conversation_id: str,
        case_ref: CaseRef,
        kind: InteractionKind,
        payload: InteractionPayload,
        created_by_turn: str,
        created_at: int,
        blocking: bool = True,
        revision_independent: bool = False,
        text_resolution: TextResolution = TextResolution.NEVER,
        expires_at: int | None = None,
    ) -> Interaction:
        """A new, active card bound to `case_ref.expected_revision`, its hash computed here."""
        return cls(
            interaction_id=interaction_id,
            account_id=account_id,
            conversation_id=conversation_id,
            case_ref=case_ref,
            kind=kind,
            blocking=blocking,
            revision_independent=revision_independent,
            text_resolution=text_resolution,
            payload=payload,
            payload_hash=payload.hash(),
            created_by_turn=created_by_turn,
            created_at=created_at,
            expires_at=expires_at,
        )

    @property
    def bound_revision(self) -> int:
        return self.case_ref.expected_revision

    def content_digest(self) -> str:
        """Digest of what never changes in this card (everything but its lifecycle fields):
        its case and revision, kind, rules and payload, the stored actions a click runs. The
        replay record keeps it, so the audit chain vouches for the card."""
        return digest(self.model_dump(mode="json", exclude=_LIFECYCLE))

    def transition(
        self,
        target: InteractionStatus,
        *,
        at: int,
        option_id: str | None = None,
        event_ids: tuple[str, ...] = (),
    ) -> Interaction:
        """This card in status `target`; raises `IllegalTransition` off the status machine."""
        if not can_transition(self.status, target):
            raise IllegalTransition(f"{self.status.value} -> {target.value} is not a legal move")
        update: dict[str, Any] = {"status": target}
        if target is InteractionStatus.RESOLVING:
            update["resolved_option_id"] = option_id
        elif target is InteractionStatus.ACTIVE:
            update["resolved_option_id"] = None
        elif target in (InteractionStatus.RESOLVED, InteractionStatus.DECLINED,
                        InteractionStatus.DISMISSED):  # fmt: skip
            update["resolved_at"] = at
            update["resolved_option_id"] = option_id or self.resolved_option_id
            update["resolution_event_ids"] = event_ids
        else:
            update["resolved_at"] = at
        return self.model_copy(update=update)

    def view(self) -> InteractionView:
        return InteractionView(
            interaction_id=self.interaction_id,
            interaction_kind=self.kind,
            title=_shown(self.payload.title),
            body=_shown(self.payload.body),
            options=tuple(option.view() for option in self.payload.options),
            review_entries=self.payload.review_entries,
            freeform_prompt=_shown(self.payload.freeform_prompt),
            blocking=self.blocking,
            case_revision=self.bound_revision,
            expires_at=self.expires_at,
        )


class InteractionView(FrozenModel):
    """The client's view of a card: everything shown, no stored action."""

    interaction_id: InteractionId
    interaction_kind: InteractionKind
    title: NonEmptyStr
    body: str | None = None
    options: tuple[InteractionOptionView, ...] = Field(min_length=1)
    review_entries: tuple[ReviewEntry, ...] = ()
    freeform_prompt: str | None = None
    blocking: bool
    case_revision: Revision
    expires_at: Millis | None = None


class IllegalTransition(TurnframeError):
    code = codes.INTERACTION_ILLEGAL_TRANSITION


# --- client answers -----------------------------------------------------------------------------


class InteractionResponse(InputModel):
    """All a client may say about a card: which card, which option, at which revision, free text.
    A refusal raises `InvalidTurnInput`."""

    interaction_id: InteractionId
    option_id: OptionId
    expected_case_revision: Revision
    freeform_input: str | None = Field(default=None, max_length=10_000)


class InteractionRejected(TurnframeError):
    """A client answer the server refuses; nothing is executed."""

    code = codes.INTERACTION_NOT_FOUND


class InteractionNotFound(InteractionRejected):
    """Unknown id, another account's card and another conversation's card look exactly alike."""

    code = codes.INTERACTION_NOT_FOUND

    def __init__(self) -> None:
        super().__init__("interaction not found")


class AlreadyAnswered(InteractionRejected):
    """A second answer: the first one stands and is returned; nothing runs again."""

    code = codes.INTERACTION_ALREADY_ANSWERED

    def __init__(self, interaction: Interaction) -> None:
        super().__init__("this interaction was already answered")
        self.interaction = interaction


class InteractionNotActive(InteractionRejected):
    code = codes.INTERACTION_NOT_ACTIVE

    def __init__(self, interaction: Interaction) -> None:
        super().__init__(f"this interaction is {interaction.status.value}")
        self.interaction = interaction


class InteractionExpired(InteractionRejected):
    code = codes.INTERACTION_EXPIRED

    def __init__(self, interaction: Interaction) -> None:
        super().__init__("this interaction has expired")
        self.interaction = interaction


class UnknownOption(InteractionRejected):
    code = codes.INTERACTION_UNKNOWN_OPTION

    def __init__(self) -> None:
        super().__init__("this option is not one of the card's options")


class StaleInteraction(InteractionRejected):
    code = codes.INTERACTION_STALE

    def __init__(self, interaction: Interaction, current_revision: int) -> None:
        super().__init__("the record changed since this card was shown")
        self.interaction = interaction
        self.bound_revision = interaction.bound_revision
        self.current_revision = current_revision


class FreeformNotAllowed(InteractionRejected):
    code = codes.INTERACTION_FREEFORM_NOT_ALLOWED

    def __init__(self) -> None:
        super().__init__("this option takes no free text")


class FreeformRequiredMissing(InteractionRejected):
    code = codes.INTERACTION_FREEFORM_REQUIRED

    def __init__(self) -> None:
        super().__init__("this option needs free text")


class FreeformTooLong(InteractionRejected):
    code = codes.INTERACTION_FREEFORM_TOO_LONG

    def __init__(self, max_len: int) -> None:
        super().__init__(f"free text is limited to {max_len} characters")
        self.max_len = max_len


class PayloadCorrupt(InteractionRejected):
    code = codes.INTERACTION_PAYLOAD_CORRUPT

    def __init__(self) -> None:
        super().__init__("the stored card does not match its hash")


class AcceptedAnswer(FrozenModel):
    """A client answer the server accepted; the meaning comes from the stored action."""

    interaction_id: InteractionId
    case_ref: CaseRef
    interaction_kind: InteractionKind
    option_id: OptionId
    action: StoredAction
    action_class: ActionClass
    channel: ResolutionChannel
    freeform_input: str | None = None
    payload_hash: Digest


def validate_answer(
    interaction: Interaction | None,
    response: InteractionResponse,
    *,
    account_id: str,
    conversation_id: str,
    current_revision: int,
    now: int,
    channel: ResolutionChannel = ResolutionChannel.CLICK,
) -> AcceptedAnswer:
    """Judge a client answer, in this order: ownership, status and expiry, option membership,
    revision, free-text policy. The first failing rule raises; nothing is written here.

    `interaction` is whatever the store returned for the id (None when missing). An unknown id
    and a card owned by another account or conversation raise the identical `InteractionNotFound`.
    """
    if (
        interaction is None
        or interaction.interaction_id != response.interaction_id
        or interaction.account_id != account_id
        or interaction.conversation_id != conversation_id
    ):
        raise InteractionNotFound()
    if interaction.payload_hash != interaction.payload.hash():
        raise PayloadCorrupt()
    if interaction.status in (InteractionStatus.RESOLVED, InteractionStatus.RESOLVING):
        raise AlreadyAnswered(interaction)
    if interaction.status is not InteractionStatus.ACTIVE:
        raise InteractionNotActive(interaction)
    if interaction.expires_at is not None and now >= interaction.expires_at:
        raise InteractionExpired(interaction)
    option = interaction.payload.option(response.option_id)
    if option is None:
        raise UnknownOption()
    if channel is ResolutionChannel.TEXT and (
        interaction.text_resolution is TextResolution.NEVER
        or option.action_class.authorizes_commands
    ):
        raise InteractionNotActive(interaction)
    if not interaction.revision_independent and (
        response.expected_case_revision != interaction.bound_revision
        or current_revision != interaction.bound_revision
    ):
        raise StaleInteraction(interaction, current_revision)
    text = response.freeform_input
    if text is not None and not text.strip():
        text = None
    policy = option.freeform
    if isinstance(policy, FreeformForbidden):
        if text is not None:
            raise FreeformNotAllowed()
    else:
        if text is None and isinstance(policy, FreeformRequired):
            raise FreeformRequiredMissing()
        if text is not None and len(text) > policy.max_len:
            raise FreeformTooLong(policy.max_len)
    return AcceptedAnswer(
        interaction_id=interaction.interaction_id,
        case_ref=interaction.case_ref,
        interaction_kind=interaction.kind,
        option_id=option.option_id,
        action=option.action,
        action_class=option.action_class,
        channel=channel,
        freeform_input=text,
        payload_hash=interaction.payload_hash,
    )
