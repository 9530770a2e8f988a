"""turnframe_core: Turnframe's pure types and rules (pydantic + stdlib; no I/O).

Models propose meaning; deterministic code decides effects; committed events decide claims.

What this module exports (`__all__`) is what an adopter writes a workflow, an interpreter, a
narrator, cards and turn inputs with, plus every error type core raises and `codes`. Wire and audit
types (blocks, turns, replay records, stream events, claim and wording rules) are public in their
own modules, `turnframe_core.blocks`, `.turn`, `.replay`, `.stream`, ...; a name that used to be
exported here still resolves here, imported from its home module on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from turnframe_core import codes
from turnframe_core.blocks import (
    ForbiddenAuthorship,
    MalformedModelOutput,
    UnsafeUri,
)
from turnframe_core.cases import (
    CaseKey,
    CaseRef,
)
from turnframe_core.claims import (
    ClaimGuardViolation,
)
from turnframe_core.commands import (
    CommandBatch,
    CommandEnvelope,
    CommandPolicy,
    ConfirmationPolicy,
    ExternalSaga,
    IdempotencyKeyMismatch,
    PerCase,
    RiskClass,
    ScopeViolation,
)
from turnframe_core.copytext import (
    Localized,
)
from turnframe_core.errors import (
    TurnframeError,
)
from turnframe_core.events import (
    DomainEvent,
    ReceiptSeverity,
    ReceiptSpec,
)
from turnframe_core.export import (
    ForgedBlock,
    InvalidVisMessage,
)
from turnframe_core.facts import (
    OperationalOutcome,
    StateValue,
)
from turnframe_core.ids import (
    InvalidId,
    UlidIdSource,
    derive_id,
)
from turnframe_core.interactions import (
    AlreadyAnswered,
    ApplyOperation,
    ConfirmCommands,
    DeclineAndRecord,
    FreeformNotAllowed,
    FreeformRequiredMissing,
    FreeformTooLong,
    IllegalTransition,
    InteractionExpired,
    InteractionKind,
    InteractionNotActive,
    InteractionNotFound,
    InteractionOption,
    InteractionPayload,
    InteractionRejected,
    InteractionResponse,
    InvalidInteraction,
    OptionStyle,
    PayloadCorrupt,
    StaleInteraction,
    UnknownOption,
)
from turnframe_core.moves import (
    Move,
    MoveKind,
    MovesRefused,
    Referable,
    ReferableKind,
    ReferableOption,
)
from turnframe_core.server_events import (
    ServerEvent,
)
from turnframe_core.stream import (
    StreamEvent,
    StreamMode,
    is_terminal,
)
from turnframe_core.turn import (
    InvalidTurnInput,
    TerminalStatus,
    TurnInput,
    UnsupportedSchemaVersion,
)
from turnframe_core.understanding import (
    AmbiguousTarget,
    Brief,
    CardTarget,
    Constraint,
    ConstraintKind,
    Evidence,
    HandleTarget,
    NamedReference,
    ProposedAct,
    Question,
    Understanding,
    UnderstandingRejected,
    ValueKind,
    ValueRule,
    act,
    ambiguous_act,
    constraint,
    named_record,
    question,
    understanding_of,
)
from turnframe_core.wording import (
    ClaimClass,
)
from turnframe_core.workflow import (
    ArgumentSpec,
    CompiledCommand,
    DomainRefusal,
    InteractionRequirement,
    NameableRecord,
    NextStep,
    Obligation,
    OperationSpec,
    PhaseOwnership,
    ResolvedAct,
    ViewInvariantViolation,
    Workflow,
    WorkflowDefinition,
    WorkflowView,
    as_workflow,
)

if TYPE_CHECKING:  # the names below resolve lazily at run time (`__getattr__`)
    from turnframe_core.blocks import (  # noqa: I001 (one list per module; `as` re-exports it to mypy)
        BLOCK_ORDER as BLOCK_ORDER,
        MODEL_KINDS as MODEL_KINDS,
        SERVER_KINDS as SERVER_KINDS,
        AnswerBasis as AnswerBasis,
        AnswerBlock as AnswerBlock,
        AnswerStatus as AnswerStatus,
        ArtifactBlock as ArtifactBlock,
        Author as Author,
        BlockKind as BlockKind,
        CopyRef as CopyRef,
        InteractionBlock as InteractionBlock,
        NoticeBlock as NoticeBlock,
        NoticeSeverity as NoticeSeverity,
        ReceiptBlock as ReceiptBlock,
        ResponseBlock as ResponseBlock,
        TransitionBlock as TransitionBlock,
        UnknownBlock as UnknownBlock,
        parse_model_output as parse_model_output,
    )
    from turnframe_core.canonical import (
        Digest as Digest,
        canonical_json as canonical_json,
        digest as digest,
    )
    from turnframe_core.cases import (
        CaseId as CaseId,
        WorkflowKey as WorkflowKey,
    )
    from turnframe_core.claims import (
        ClaimViolation as ClaimViolation,
        check_claims as check_claims,
        ensure_claims as ensure_claims,
    )
    from turnframe_core.commands import (
        AtomicityScope as AtomicityScope,
        ClaimMode as ClaimMode,
        CommandOrigin as CommandOrigin,
        ConfirmedInteraction as ConfirmedInteraction,
        DirectSafeUserAct as DirectSafeUserAct,
        ExplicitGroup as ExplicitGroup,
        ExternalCallback as ExternalCallback,
        InternalPolicy as InternalPolicy,
        PerCommand as PerCommand,
        origin_for_answer as origin_for_answer,
        origin_is_trusted as origin_is_trusted,
        origin_satisfies as origin_satisfies,
    )
    from turnframe_core.facts import (
        ActAwaitingConfirmation as ActAwaitingConfirmation,
        ActChangedNothing as ActChangedNothing,
        ActHeld as ActHeld,
        ActRefused as ActRefused,
        AnswerProgress as AnswerProgress,
        InstructionDeclined as InstructionDeclined,
        InteractionAlreadyAnswered as InteractionAlreadyAnswered,
        InteractionAvailable as InteractionAvailable,
        Knowledge as Knowledge,
        NarratableFact as NarratableFact,
        NotUnderstood as NotUnderstood,
        ObligationOpen as ObligationOpen,
        OperationAvailable as OperationAvailable,
        ProposedChange as ProposedChange,
        RecordFact as RecordFact,
        ValueNeeded as ValueNeeded,
    )
    from turnframe_core.ids import (
        AccountId as AccountId,
        BatchId as BatchId,
        BlockId as BlockId,
        CommandId as CommandId,
        ConversationId as ConversationId,
        EventId as EventId,
        IdSource as IdSource,
        InteractionId as InteractionId,
        OptionId as OptionId,
        OutboxId as OutboxId,
        ReceiptId as ReceiptId,
        ReplayToken as ReplayToken,
        SequentialIdSource as SequentialIdSource,
        TurnId as TurnId,
    )
    from turnframe_core.interactions import (
        AcceptedAnswer as AcceptedAnswer,
        ActionClass as ActionClass,
        CardPurpose as CardPurpose,
        ConfirmsAct as ConfirmsAct,
        Custom as Custom,
        DeclineCommands as DeclineCommands,
        DefersAct as DefersAct,
        Dismiss as Dismiss,
        FreeformForbidden as FreeformForbidden,
        FreeformOptional as FreeformOptional,
        FreeformPolicy as FreeformPolicy,
        FreeformRequired as FreeformRequired,
        Interaction as Interaction,
        InteractionOptionView as InteractionOptionView,
        InteractionStatus as InteractionStatus,
        InteractionView as InteractionView,
        MeetsRequirement as MeetsRequirement,
        ResolutionChannel as ResolutionChannel,
        ResolveClarification as ResolveClarification,
        ReviewEntry as ReviewEntry,
        SelectTarget as SelectTarget,
        StoredAction as StoredAction,
        TextResolution as TextResolution,
        can_transition as can_transition,
        validate_answer as validate_answer,
        validate_payload_for as validate_payload_for,
    )
    from turnframe_core.replay import (
        AwaitingConfirmationOutcome as AwaitingConfirmationOutcome,
        ChainBreak as ChainBreak,
        CommandOutcome as CommandOutcome,
        CommandOutcomeRecord as CommandOutcomeRecord,
        CommittedOutcome as CommittedOutcome,
        CopyRender as CopyRender,
        FailedOutcome as FailedOutcome,
        IdempotentReplayOutcome as IdempotentReplayOutcome,
        OutcomeUnknown as OutcomeUnknown,
        PolicyDecisionRecord as PolicyDecisionRecord,
        ProseFinding as ProseFinding,
        ProviderAttempt as ProviderAttempt,
        RejectedOutcome as RejectedOutcome,
        ReplayRecord as ReplayRecord,
        RevisionConflictOutcome as RevisionConflictOutcome,
        TargetResolutionRecord as TargetResolutionRecord,
        TurnPhase as TurnPhase,
        WorkflowVersion as WorkflowVersion,
        verify_chain as verify_chain,
    )
    from turnframe_core.stream import (
        BlockCompleted as BlockCompleted,
        BlockDelta as BlockDelta,
        BlockStarted as BlockStarted,
        TurnCompleted as TurnCompleted,
        TurnFailed as TurnFailed,
        TurnPhaseEvent as TurnPhaseEvent,
        TurnStep as TurnStep,
        block_content_hash as block_content_hash,
        block_events as block_events,
        parse_stream_event as parse_stream_event,
        publishes_outcomes as publishes_outcomes,
        split_tokens as split_tokens,
    )
    from turnframe_core.turn import (
        MAX_ATTACHMENTS as MAX_ATTACHMENTS,
        MAX_TEXT_CHARS as MAX_TEXT_CHARS,
        SERVER_TURN_ORIGIN as SERVER_TURN_ORIGIN,
        TURN_SCHEMA_VERSION as TURN_SCHEMA_VERSION,
        AssistantTurn as AssistantTurn,
        AttachmentRef as AttachmentRef,
        Expectation as Expectation,
        ExpectationKind as ExpectationKind,
        Offer as Offer,
        TurnStatus as TurnStatus,
    )
    from turnframe_core.understanding import (
        ActId as ActId,
        ArgumentValue as ArgumentValue,
        CardAnswerProposal as CardAnswerProposal,
        Handle as Handle,
        NewRecord as NewRecord,
        OfferedCard as OfferedCard,
        OfferedHandle as OfferedHandle,
        OfferedOperation as OfferedOperation,
        Problem as Problem,
        QuestionId as QuestionId,
        Target as Target,
        validate_understanding as validate_understanding,
    )
    from turnframe_core.wording import (
        GUARDED_LANGUAGES as GUARDED_LANGUAGES,
        TurnBacking as TurnBacking,
        WordingFinding as WordingFinding,
        check_wording as check_wording,
    )
    from turnframe_core.workflow import (
        ArgumentName as ArgumentName,
        DeclaresCopy as DeclaresCopy,
        DeclaresCopySamples as DeclaresCopySamples,
        DeclaresFollowUps as DeclaresFollowUps,
        DeclaresReceiptClaims as DeclaresReceiptClaims,
        DeclaresReceiptTemplates as DeclaresReceiptTemplates,
        OperationName as OperationName,
        ViewViolation as ViewViolation,
        WorkflowNotice as WorkflowNotice,
        check_view as check_view,
        ensure_view as ensure_view,
    )

__all__ = [
    "AlreadyAnswered",
    "AmbiguousTarget",
    "ApplyOperation",
    "ArgumentSpec",
    "Brief",
    "CardTarget",
    "CaseKey",
    "CaseRef",
    "ClaimClass",
    "ClaimGuardViolation",
    "CommandBatch",
    "CommandEnvelope",
    "CommandPolicy",
    "CompiledCommand",
    "ConfirmCommands",
    "ConfirmationPolicy",
    "Constraint",
    "ConstraintKind",
    "DeclineAndRecord",
    "DomainEvent",
    "DomainRefusal",
    "Evidence",
    "ExternalSaga",
    "ForbiddenAuthorship",
    "ForgedBlock",
    "FreeformNotAllowed",
    "FreeformRequiredMissing",
    "FreeformTooLong",
    "HandleTarget",
    "IdempotencyKeyMismatch",
    "IllegalTransition",
    "InteractionExpired",
    "InteractionKind",
    "InteractionNotActive",
    "InteractionNotFound",
    "InteractionOption",
    "InteractionPayload",
    "InteractionRejected",
    "InteractionRequirement",
    "InteractionResponse",
    "InvalidId",
    "InvalidInteraction",
    "InvalidTurnInput",
    "InvalidVisMessage",
    "Localized",
    "MalformedModelOutput",
    "Move",
    "MoveKind",
    "MovesRefused",
    "NameableRecord",
    "NamedReference",
    "NextStep",
    "Obligation",
    "OperationSpec",
    "OperationalOutcome",
    "OptionStyle",
    "PayloadCorrupt",
    "PerCase",
    "PhaseOwnership",
    "ProposedAct",
    "Question",
    "ReceiptSeverity",
    "ReceiptSpec",
    "Referable",
    "ReferableKind",
    "ReferableOption",
    "ResolvedAct",
    "RiskClass",
    "ScopeViolation",
    "ServerEvent",
    "StaleInteraction",
    "StateValue",
    "StreamEvent",
    "StreamMode",
    "TerminalStatus",
    "TurnInput",
    "TurnframeError",
    "UlidIdSource",
    "Understanding",
    "UnderstandingRejected",
    "UnknownOption",
    "UnsafeUri",
    "UnsupportedSchemaVersion",
    "ValueKind",
    "ValueRule",
    "ViewInvariantViolation",
    "Workflow",
    "WorkflowDefinition",
    "WorkflowView",
    "as_workflow",
    "codes",
    "derive_id",
    "is_terminal",
    "act",
    "ambiguous_act",
    "constraint",
    "named_record",
    "question",
    "understanding_of",
]

#: Names exported here before the adopter surface was cut, by home module.
_OLDER: dict[str, str] = {
    "turnframe_core.blocks": (
        "BLOCK_ORDER MODEL_KINDS SERVER_KINDS AnswerBasis AnswerBlock AnswerStatus ArtifactBlock "
        "Author BlockKind CopyRef InteractionBlock NoticeBlock NoticeSeverity ReceiptBlock "
        "ResponseBlock TransitionBlock UnknownBlock parse_model_output"
    ),
    "turnframe_core.canonical": "Digest canonical_json digest",
    "turnframe_core.cases": "CaseId WorkflowKey",
    "turnframe_core.claims": "ClaimViolation check_claims ensure_claims",
    "turnframe_core.commands": (
        "AtomicityScope ClaimMode CommandOrigin ConfirmedInteraction DirectSafeUserAct "
        "ExplicitGroup ExternalCallback InternalPolicy PerCommand origin_for_answer "
        "origin_is_trusted origin_satisfies"
    ),
    "turnframe_core.facts": (
        "ActAwaitingConfirmation ActChangedNothing ActHeld ActRefused AnswerProgress "
        "InstructionDeclined InteractionAlreadyAnswered InteractionAvailable Knowledge "
        "NarratableFact NotUnderstood ObligationOpen OperationAvailable ProposedChange RecordFact "
        "ValueNeeded"
    ),
    "turnframe_core.ids": (
        "AccountId BatchId BlockId CommandId ConversationId EventId IdSource InteractionId "
        "OptionId OutboxId ReceiptId ReplayToken SequentialIdSource TurnId"
    ),
    "turnframe_core.interactions": (
        "AcceptedAnswer ActionClass CardPurpose ConfirmsAct Custom DeclineCommands DefersAct "
        "Dismiss FreeformForbidden FreeformOptional FreeformPolicy FreeformRequired Interaction "
        "InteractionOptionView InteractionStatus InteractionView MeetsRequirement "
        "ResolutionChannel ResolveClarification ReviewEntry SelectTarget StoredAction "
        "TextResolution can_transition validate_answer validate_payload_for"
    ),
    "turnframe_core.replay": (
        "AwaitingConfirmationOutcome ChainBreak CommandOutcome CommandOutcomeRecord "
        "CommittedOutcome CopyRender FailedOutcome IdempotentReplayOutcome OutcomeUnknown "
        "PolicyDecisionRecord ProseFinding ProviderAttempt RejectedOutcome ReplayRecord "
        "RevisionConflictOutcome TargetResolutionRecord TurnPhase WorkflowVersion verify_chain"
    ),
    "turnframe_core.stream": (
        "BlockCompleted BlockDelta BlockStarted TurnCompleted TurnFailed TurnPhaseEvent TurnStep "
        "block_content_hash block_events parse_stream_event publishes_outcomes split_tokens"
    ),
    "turnframe_core.turn": (
        "MAX_ATTACHMENTS MAX_TEXT_CHARS SERVER_TURN_ORIGIN TURN_SCHEMA_VERSION AssistantTurn "
        "AttachmentRef Expectation ExpectationKind Offer TurnStatus"
    ),
    "turnframe_core.understanding": (
        "ActId ArgumentValue CardAnswerProposal Handle NewRecord OfferedCard OfferedHandle "
        "OfferedOperation Problem QuestionId Target validate_understanding"
    ),
    "turnframe_core.wording": "GUARDED_LANGUAGES TurnBacking WordingFinding check_wording",
    "turnframe_core.workflow": (
        "ArgumentName DeclaresCopy DeclaresCopySamples DeclaresFollowUps DeclaresReceiptClaims "
        "DeclaresReceiptTemplates OperationName ViewViolation WorkflowNotice check_view "
        "ensure_view"
    ),
}
_HOMES: dict[str, str] = {name: home for home, names in _OLDER.items() for name in names.split()}


def __getattr__(name: str) -> Any:
    """An older export, imported from its home module (no warning: it stays supported)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
