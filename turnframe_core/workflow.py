"""The workflow contract: what a domain workflow tells Turnframe, and the rules its views obey.

A workflow is a pure projector plus a compiler. `project` turns a case's state into a
`WorkflowView`: exactly one phase (a single field), 0..n parameterized obligations in ask order, at
most one blocking interaction requirement, notices, and an outcome only when the phase is terminal
and no obligation is open. `check_view` reports every broken view rule with its own code (one per
breach: an outcome beside three open obligations is three); the runtime refuses a view that
breaks any. Operations the workflow offers are compiled from resolved acts into typed commands, or
refused in the domain's own words. Nothing here performs I/O.

An adopter subclasses `Workflow`: its required methods are abstract, its optional capabilities
(receipt templates, copy samples, copy templates, receipt claims, follow-ups) default to "not
declared". `WorkflowDefinition` and the `Declares*` protocols describe the same contract
structurally; `as_workflow` is the one place that adapts such an object to a `Workflow`.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Annotated, Any, Protocol, runtime_checkable

from pydantic import Field, StringConstraints, model_validator

from turnframe_core import codes
from turnframe_core.blocks import NoticeSeverity
from turnframe_core.canonical import Digest, canonical_json
from turnframe_core.cases import CaseRef, RecordKind
from turnframe_core.commands import CommandPolicy, RiskClass
from turnframe_core.copytext import Localized
from turnframe_core.errors import TurnframeError
from turnframe_core.events import DomainEvent, ReceiptSpec
from turnframe_core.interactions import InteractionKind, InteractionPayload
from turnframe_core.model import FrozenModel, NonEmptyStr
from turnframe_core.understanding import ValueRule
from turnframe_core.wording import ClaimClass

__all__ = [
    "ArgumentName",
    "DeclaresCopy",
    "DeclaresCopySamples",
    "DeclaresFollowUps",
    "DeclaresReceiptClaims",
    "DeclaresReceiptTemplates",
    "ArgumentSpec",
    "CompiledCommand",
    "DomainRefusal",
    "InteractionRequirement",
    "NameableRecord",
    "NextStep",
    "Obligation",
    "OperationName",
    "OperationSpec",
    "PhaseOwnership",
    "ResolvedAct",
    "ViewInvariantViolation",
    "ViewViolation",
    "Workflow",
    "WorkflowDefinition",
    "WorkflowNotice",
    "WorkflowView",
    "as_workflow",
    "check_view",
    "ensure_view",
]

#: An operation a workflow offers (lowercase; dots group related operations).
OperationName = Annotated[
    str, StringConstraints(min_length=1, max_length=100, pattern=r"^[a-z][a-z0-9_.]*$")
]
#: An operation's argument name; it becomes a JSON key, so it is snake_case.
ArgumentName = Annotated[
    str, StringConstraints(min_length=1, max_length=100, pattern=r"^[a-z][a-z0-9_]*$")
]


class PhaseOwnership(StrEnum):
    """Who moves the case out of its current phase."""

    USER = "user"
    SYSTEM = "system"
    EXTERNAL = "external"
    TERMINAL = "terminal"


class Obligation(FrozenModel):
    """Something still owed on a case; repeated entities give one obligation per entity params."""

    key: NonEmptyStr
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _canonical(self) -> Obligation:
        canonical_json(self.params)  # raises CanonicalJsonError: an obligation id must exist
        return self

    @property
    def obligation_id(self) -> str:
        """The canonical JSON of the obligation: equal obligations share it, others never do."""
        return canonical_json(self)


class InteractionRequirement(FrozenModel):
    """The card a view needs; the runtime builds, persists and shows it, never the projector."""

    key: NonEmptyStr
    kind: InteractionKind
    blocking: bool = True
    revision_independent: bool = False
    confirms_risk: RiskClass = RiskClass.IRREVERSIBLE
    expires_in_ms: int | None = Field(default=None, ge=1)
    params: dict[str, Any] = Field(default_factory=dict)


class WorkflowNotice(FrozenModel):
    """A workflow's own remark about a case, carried under a stable code."""

    code: NonEmptyStr
    severity: NoticeSeverity
    text: NonEmptyStr


class WorkflowView(FrozenModel):
    """One projection of one case: exactly one phase, obligations in ask order, at most one card."""

    case_ref: CaseRef
    workflow_version: NonEmptyStr
    phase: NonEmptyStr
    phase_ownership: PhaseOwnership
    obligations: tuple[Obligation, ...] = ()
    blocking_interaction: InteractionRequirement | None = None
    notices: tuple[WorkflowNotice, ...] = ()
    outcome: dict[str, Any] | None = None
    label: str | None = None

    @property
    def is_terminal(self) -> bool:
        return self.phase_ownership is PhaseOwnership.TERMINAL


# --- view invariants ----------------------------------------------------------------------------


class ViewViolation(FrozenModel):
    """One broken view rule. `detail` names positions and rules, never state values."""

    code: NonEmptyStr
    detail: NonEmptyStr


class ViewInvariantViolation(TurnframeError):
    """A projected view broke at least one rule; the runtime never uses such a view."""

    code = codes.WORKFLOW_INVARIANT_VIOLATION

    def __init__(self, violations: Sequence[ViewViolation]) -> None:
        self.violations: tuple[ViewViolation, ...] = tuple(violations)
        listed = ", ".join(v.code for v in self.violations)
        super().__init__(f"workflow view breaks {len(self.violations)} rule(s): {listed}")


def check_view(view: WorkflowView) -> list[ViewViolation]:
    """Every rule `view` breaks, one entry per breach, in rule order (empty list: a sound view)."""
    found: list[ViewViolation] = []
    first_seen: dict[str, int] = {}
    for index, obligation in enumerate(view.obligations):
        earlier = first_seen.setdefault(obligation.obligation_id, index)
        if earlier != index:
            found.append(
                ViewViolation(
                    code=codes.WORKFLOW_DUPLICATE_OBLIGATION,
                    detail=f"obligations[{index}] repeats obligations[{earlier}]",
                )
            )
    ownership = view.phase_ownership
    requirement = view.blocking_interaction
    if ownership is PhaseOwnership.USER and requirement is None:
        found.append(
            ViewViolation(
                code=codes.WORKFLOW_MISSING_BLOCKING_INTERACTION,
                detail="a user-owned phase needs a blocking interaction requirement",
            )
        )
    if requirement is not None and ownership is not PhaseOwnership.USER:
        found.append(
            ViewViolation(
                code=codes.WORKFLOW_BLOCKING_ON_NON_USER_PHASE,
                detail=f"a {ownership.value} phase allows no blocking interaction requirement",
            )
        )
    if requirement is not None and not requirement.blocking:
        found.append(
            ViewViolation(
                code=codes.WORKFLOW_NON_BLOCKING_IN_BLOCKING_SLOT,
                detail="the blocking slot holds a requirement that is not blocking",
            )
        )
    if view.outcome is not None and ownership is not PhaseOwnership.TERMINAL:
        found.append(
            ViewViolation(
                code=codes.WORKFLOW_OUTCOME_ON_NON_TERMINAL_PHASE,
                detail=f"a {ownership.value} phase carries no outcome",
            )
        )
    if ownership is PhaseOwnership.TERMINAL and view.outcome is None:
        found.append(
            ViewViolation(
                code=codes.WORKFLOW_TERMINAL_WITHOUT_OUTCOME,
                detail="a terminal phase needs an outcome",
            )
        )
    if view.outcome is not None:
        # An outcome says the case is finished; every obligation still listed contradicts it.
        found.extend(
            ViewViolation(
                code=codes.WORKFLOW_OUTCOME_WITH_OBLIGATIONS,
                detail=f"obligations[{index}] is open beside an outcome",
            )
            for index in range(len(view.obligations))
        )
    return found


def ensure_view(view: WorkflowView) -> WorkflowView:
    """`view` itself if it breaks no rule; else `ViewInvariantViolation` listing every breach."""
    violations = check_view(view)
    if violations:
        raise ViewInvariantViolation(violations)
    return view


# --- operations, acts and compilation -----------------------------------------------------------


class ArgumentSpec(FrozenModel):
    """One argument an operation takes; `description` is what an Interpreter reads about it.
    `value` types it: free text (the default) must occur in the user's words; a typed value
    (email, date, enum, amount) must parse as its type."""

    name: ArgumentName
    description: NonEmptyStr
    required: bool = True
    value: ValueRule = Field(default_factory=ValueRule)


class OperationSpec(FrozenModel):
    """An operation the current view offers; only `proposable` ones reach a model."""

    operation: OperationName
    summary: NonEmptyStr
    arguments: tuple[ArgumentSpec, ...] = ()
    proposable: bool = True

    @model_validator(mode="after")
    def _unique_arguments(self) -> OperationSpec:
        names = [argument.name for argument in self.arguments]
        if len(names) != len(set(names)):
            raise ValueError("argument names of an operation are unique")
        return self


class ResolvedAct(FrozenModel):
    """An act after target resolution: one operation on one case, arguments by name."""

    act_id: NonEmptyStr
    operation: OperationName
    case_ref: CaseRef
    arguments: dict[str, Any] = Field(default_factory=dict)
    evidence_digest: Digest


class CompiledCommand(FrozenModel):
    """A typed command a resolved act compiles to; the runtime wraps it in an envelope."""

    command_type: NonEmptyStr
    payload: dict[str, Any] = Field(default_factory=dict)


class DomainRefusal(FrozenModel):
    """The workflow declines an act; `explanation` is the domain's own sentence for the user,
    best a copy reference (rendered in the turn's locale), else words the domain wrote."""

    code: NonEmptyStr
    explanation: NonEmptyStr | Localized


class NameableRecord(FrozenModel):
    """A record a user may name to reach its case (a booking reference, an order number): its
    kind, and the form a reference of that kind has (`pattern`, matched whole, on at most
    `max_length` characters). A reference of another form is refused before any lookup."""

    record: RecordKind
    pattern: NonEmptyStr
    max_length: int = Field(default=64, ge=1, le=256)

    @model_validator(mode="after")
    def _compiles(self) -> NameableRecord:
        try:
            re.compile(self.pattern)
        except re.error:
            raise ValueError("a nameable record's pattern is a regular expression") from None
        return self

    def accepts(self, reference: str) -> bool:
        """Whether `reference` has this record's form (its length checked first)."""
        return (
            len(reference) <= self.max_length and re.fullmatch(self.pattern, reference) is not None
        )


class NextStep(FrozenModel):
    """A step the user could take next: an offered operation, how to say it, preset arguments."""

    operation: OperationName
    #: how the step reads to the user (best a copy reference, rendered in the turn's locale)
    words: NonEmptyStr | Localized
    arguments: dict[str, Any] = Field(default_factory=dict)


class WorkflowDefinition(Protocol):
    """What a domain implements to run under Turnframe. Every method is pure: no I/O, no clock,
    no randomness, no model call; the same version and state always give the same answer.

    A change in what `project` or `compile` derives requires a new `version`; a stored case is
    projected by the version recorded against it.
    """

    @property
    def key(self) -> str:
        """The workflow key cases carry (`CaseRef.workflow`)."""
        ...

    @property
    def version(self) -> str:
        """The version views carry as `workflow_version`."""
        ...

    def project(self, case_ref: CaseRef, state: Mapping[str, Any] | None) -> WorkflowView:
        """The view of the case; `state` None means the case does not exist yet."""
        ...

    def operations(self, view: WorkflowView) -> Sequence[OperationSpec]:
        """The operations on offer in this view; nothing else can be proposed or compiled."""
        ...

    def compile(
        self, act: ResolvedAct, view: WorkflowView, state: Mapping[str, Any] | None
    ) -> Sequence[CompiledCommand] | DomainRefusal:
        """The commands an act means against this view and state, or the domain's refusal."""
        ...

    def policy(self, command_type: str) -> CommandPolicy:
        """The command's policy; an unknown type gets `CommandPolicy.conservative()`."""
        ...

    def receipts(self, events: Sequence[DomainEvent]) -> Sequence[ReceiptSpec]:
        """What receipts to render for committed events; each spec cites the events it states."""
        ...

    def obligation_sentence(self, obligation: Obligation, locale: str) -> str | Localized | None:
        """How an open obligation reads to the user: a copy reference the runtime renders in the
        turn's negotiated locale (or words for `locale`); None when there is no sentence."""
        ...

    def narratable_state(self, state: Mapping[str, Any] | None) -> Mapping[str, Any]:
        """The fields of a case a narrator may state (values as the user would read them)."""
        ...

    def next_steps(self, view: WorkflowView) -> Sequence[NextStep]:
        """Steps worth suggesting in this view; each names an operation the view offers."""
        ...

    def build_interaction(
        self,
        requirement: InteractionRequirement,
        view: WorkflowView,
        state: Mapping[str, Any] | None,
    ) -> InteractionPayload:
        """The card payload for a view's blocking requirement; the runtime persists it."""
        ...


@runtime_checkable
class DeclaresReceiptTemplates(Protocol):
    """A workflow that names its receipt templates, so a runtime can refuse to start while any
    served locale lacks one (rather than finding the gap after a command committed).

    A receipt renders its title from the template `<ReceiptSpec.template_id>.title`.
    """

    def receipt_templates(self) -> Sequence[str]:
        """Every `template_id` that `receipts` may put in a `ReceiptSpec`."""
        ...


@runtime_checkable
class DeclaresCopySamples(Protocol):
    """A workflow that declares sample parameters for its templates: the runtime renders each
    template with each set in every served locale before it starts, and refuses to start
    naming a template that does not render (an undefined name, a template it includes that
    no catalog holds). A catalog may declare them too (`samples.json` beside its templates)."""

    def copy_samples(self) -> Mapping[str, Sequence[Mapping[str, Any]]]:
        """Template id -> the sets of parameters it is rendered with (each as the runtime
        would give it: a receipt's its `ReceiptSpec.params`)."""
        ...


@runtime_checkable
class DeclaresCopy(Protocol):
    """A workflow that names every template its copy references may use, so a runtime refuses
    to start while a served locale lacks one of them or one of their messages.

    A confirmation card for a command renders its title from `<command type>.confirm` when a
    catalog holds it (the command's payload as parameters); a field a server answer states reads
    as `<workflow key>.fact.<name>` (given its `value`), else as the label
    `<workflow key>.field.<name>` and the value, when those exist; what choosing a card's option
    does, as a narrator's `explain` says it, reads as `<workflow key>.option.<option id>` (given
    the card's `metadata`; declare samples for it when it uses any)."""

    def copy_templates(self) -> Sequence[str]:
        """Every template id the workflow's `Localized` texts may name."""
        ...


@runtime_checkable
class DeclaresReceiptClaims(Protocol):
    """A workflow that says what each of its receipts backs: model prose beside a receipt may
    claim only those outcome classes ("the name was saved" backs an update, not "the refund
    was issued"). A receipt whose status code is not named backs every outcome class."""

    def receipt_claims(self) -> Mapping[str, Sequence[ClaimClass]]:
        """Receipt `status_code` -> the outcome claim classes its receipt backs."""
        ...


@runtime_checkable
class DeclaresFollowUps(Protocol):
    """A workflow whose receipts may say that a follow-up is scheduled (the other side will
    answer, and the user will hear of it). Only such a receipt lets model prose promise to let
    the user know; without this declaration no prose may promise it."""

    def follow_up_receipts(self) -> Sequence[str]:
        """The receipt `status_code`s that say a follow-up is scheduled."""
        ...


class Workflow(ABC):
    """The base class a domain workflow subclasses: `WorkflowDefinition`'s methods are abstract,
    the optional capabilities return "not declared" (empty) unless overridden. Every method is
    pure, as `WorkflowDefinition` states. `key` and `version` may be plain class attributes."""

    @property
    @abstractmethod
    def key(self) -> str:
        """The workflow key cases carry (`CaseRef.workflow`)."""

    @property
    @abstractmethod
    def version(self) -> str:
        """The version views carry as `workflow_version`."""

    @abstractmethod
    def project(self, case_ref: CaseRef, state: Mapping[str, Any] | None) -> WorkflowView:
        """The view of the case; `state` None means the case does not exist yet."""

    @abstractmethod
    def operations(self, view: WorkflowView) -> Sequence[OperationSpec]:
        """The operations on offer in this view; nothing else can be proposed or compiled."""

    @abstractmethod
    def compile(
        self, act: ResolvedAct, view: WorkflowView, state: Mapping[str, Any] | None
    ) -> Sequence[CompiledCommand] | DomainRefusal:
        """The commands an act means against this view and state, or the domain's refusal."""

    @abstractmethod
    def policy(self, command_type: str) -> CommandPolicy:
        """The command's policy; an unknown type gets `CommandPolicy.conservative()`."""

    @abstractmethod
    def receipts(self, events: Sequence[DomainEvent]) -> Sequence[ReceiptSpec]:
        """What receipts to render for committed events; each spec cites the events it states."""

    @abstractmethod
    def obligation_sentence(self, obligation: Obligation, locale: str) -> str | Localized | None:
        """How an open obligation reads to the user (a copy reference or words), or None."""

    @abstractmethod
    def narratable_state(self, state: Mapping[str, Any] | None) -> Mapping[str, Any]:
        """The fields of a case a narrator may state (values as the user would read them)."""

    @abstractmethod
    def next_steps(self, view: WorkflowView) -> Sequence[NextStep]:
        """Steps worth suggesting in this view; each names an operation the view offers."""

    @abstractmethod
    def build_interaction(
        self,
        requirement: InteractionRequirement,
        view: WorkflowView,
        state: Mapping[str, Any] | None,
    ) -> InteractionPayload:
        """The card payload for a view's blocking requirement; the runtime persists it."""

    def receipt_templates(self) -> Sequence[str]:
        """Every `template_id` `receipts` may use (`DeclaresReceiptTemplates`); none declared."""
        return ()

    def copy_samples(self) -> Mapping[str, Sequence[Mapping[str, Any]]]:
        """Sample parameters per template (`DeclaresCopySamples`); none declared."""
        return {}

    def copy_templates(self) -> Sequence[str]:
        """Every template id the workflow's texts may name (`DeclaresCopy`); none declared."""
        return ()

    def receipt_claims(self) -> Mapping[str, Sequence[ClaimClass]]:
        """Receipt status code -> claim classes it backs (`DeclaresReceiptClaims`); none
        declared, so every receipt backs every outcome class."""
        return {}

    def follow_up_receipts(self) -> Sequence[str]:
        """Receipt status codes that say a follow-up is scheduled (`DeclaresFollowUps`); none
        declared, so no prose may promise a follow-up."""
        return ()

    def follow_up_pending(self, state: Mapping[str, Any] | None) -> bool:
        """Whether this case awaits an answer an earlier turn's follow-up receipt promised the
        user would hear of (the other side has not answered yet): while it does, prose may
        still say "you'll hear back here". Not declared: False, so only a follow-up receipt of
        the same turn backs that promise."""
        return False

    def nameable(self) -> Sequence[NameableRecord]:
        """The records a user may name to reach one of this workflow's cases (looked up through
        `CaseDirectory.find`, scoped to the account); none declared."""
        return ()

    def external_answer(self, request: Any, result: Any) -> CompiledCommand | None:
        """The command that records an external system's answer to one of this workflow's
        outbox requests (`request` an `OutboxRequest`, `result` a `SendCompleted` or
        `SendFailed`: the runtime's outbox types; see its `AppliesExternalAnswers`). None, the
        default, records nothing on the case: the follow-up turn then tells only that the
        request failed, when it did."""
        return None


class _DefinedWorkflow(Workflow):
    """A `WorkflowDefinition` seen as a `Workflow`: each call goes to the definition; an
    optional capability it does not declare answers as `Workflow` does."""

    def __init__(self, definition: WorkflowDefinition) -> None:
        self.definition = definition

    @property
    def key(self) -> str:
        return self.definition.key

    @property
    def version(self) -> str:
        return self.definition.version

    def project(self, case_ref: CaseRef, state: Mapping[str, Any] | None) -> WorkflowView:
        return self.definition.project(case_ref, state)

    def operations(self, view: WorkflowView) -> Sequence[OperationSpec]:
        return self.definition.operations(view)

    def compile(
        self, act: ResolvedAct, view: WorkflowView, state: Mapping[str, Any] | None
    ) -> Sequence[CompiledCommand] | DomainRefusal:
        return self.definition.compile(act, view, state)

    def policy(self, command_type: str) -> CommandPolicy:
        return self.definition.policy(command_type)

    def receipts(self, events: Sequence[DomainEvent]) -> Sequence[ReceiptSpec]:
        return self.definition.receipts(events)

    def obligation_sentence(self, obligation: Obligation, locale: str) -> str | Localized | None:
        return self.definition.obligation_sentence(obligation, locale)

    def narratable_state(self, state: Mapping[str, Any] | None) -> Mapping[str, Any]:
        return self.definition.narratable_state(state)

    def next_steps(self, view: WorkflowView) -> Sequence[NextStep]:
        return self.definition.next_steps(view)

    def build_interaction(
        self,
        requirement: InteractionRequirement,
        view: WorkflowView,
        state: Mapping[str, Any] | None,
    ) -> InteractionPayload:
        return self.definition.build_interaction(requirement, view, state)

    def receipt_templates(self) -> Sequence[str]:
        found = self.definition
        return found.receipt_templates() if isinstance(found, DeclaresReceiptTemplates) else ()

    def copy_samples(self) -> Mapping[str, Sequence[Mapping[str, Any]]]:
        found = self.definition
        return found.copy_samples() if isinstance(found, DeclaresCopySamples) else {}

    def copy_templates(self) -> Sequence[str]:
        found = self.definition
        return found.copy_templates() if isinstance(found, DeclaresCopy) else ()

    def receipt_claims(self) -> Mapping[str, Sequence[ClaimClass]]:
        found = self.definition
        return found.receipt_claims() if isinstance(found, DeclaresReceiptClaims) else {}

    def follow_up_receipts(self) -> Sequence[str]:
        found = self.definition
        return found.follow_up_receipts() if isinstance(found, DeclaresFollowUps) else ()

    def follow_up_pending(self, state: Mapping[str, Any] | None) -> bool:
        pending = getattr(self.definition, "follow_up_pending", None)
        return bool(pending(state)) if callable(pending) else False

    def nameable(self) -> Sequence[NameableRecord]:
        declared = getattr(self.definition, "nameable", None)
        return tuple(declared()) if callable(declared) else ()

    def external_answer(self, request: Any, result: Any) -> CompiledCommand | None:
        answer = getattr(self.definition, "external_answer", None)
        return answer(request, result) if callable(answer) else None


def as_workflow(definition: Workflow | WorkflowDefinition) -> Workflow:
    """`definition` itself when it is a `Workflow`; else a `Workflow` that delegates to it and
    answers "not declared" for each optional capability it lacks. The one place that looks at
    what a workflow object has."""
    if isinstance(definition, Workflow):
        return definition
    return _DefinedWorkflow(definition)
