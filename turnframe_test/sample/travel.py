"""The sample travel desk: trips with an outbound and a return leg, a traveller's name, email and
travel date, and a rebooking the airline carries out.

- `set_name`, `set_email`, `set_travel_date`, `keep_leg`, `request_rebooking`: low risk, applied
  from words. An edit while a rebooking waits for confirmation keeps it waiting: the card shown
  before the edit goes stale, and re-projection derives a fresh card at the new revision.
- `request_rebooking` puts the trip in `awaiting_rebooking_confirmation`, a user-owned phase whose
  blocking card offers "Rebook" (the card-guarded `confirm_rebooking`, external and regulated: it
  leaves an outbox row for the airline) and "Keep my flight" (declines and records `keep_leg`).
- `withdraw` is destructive: it waits for the confirmation card its policy names.
- A kept leg is protected: asking to rebook it is refused in the domain's own words.
- The desk can lock a trip; the executor then rejects every change (the executor's rule, not the
  workflow's).
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import re
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from turnframe_core import (
    ApplyOperation,
    ArgumentSpec,
    CaseKey,
    CaseRef,
    ClaimClass,
    CommandBatch,
    CommandEnvelope,
    CommandPolicy,
    CompiledCommand,
    ConfirmationPolicy,
    DeclineAndRecord,
    DomainEvent,
    DomainRefusal,
    ExternalSaga,
    InteractionKind,
    InteractionOption,
    InteractionPayload,
    InteractionRequirement,
    Localized,
    NextStep,
    Obligation,
    OperationSpec,
    OptionStyle,
    PerCase,
    PhaseOwnership,
    ReceiptSeverity,
    ReceiptSpec,
    ResolvedAct,
    RiskClass,
    ValueKind,
    ValueRule,
    Workflow,
    WorkflowView,
    derive_id,
)
from turnframe_runtime import (
    CaseCandidate,
    CopyCatalog,
    ExecutionFailed,
    ExecutionRejected,
    ExecutionResult,
    ExecutionTimeout,
    Executor,
    LoadedCase,
    OutboxRequest,
    RevisionConflict,
    SendCompleted,
    SendFailed,
    TemplateCopy,
)

__all__ = [
    "CONFIRM_REBOOKING",
    "KEEP_LEG",
    "LEGS",
    "OPTION_EFFECTS",
    "ProcessCrash",
    "RECORD_AIRLINE_ANSWER",
    "REQUEST_REBOOKING",
    "SET_EMAIL",
    "SET_NAME",
    "SET_TRAVEL_DATE",
    "TRIP",
    "TRIP_COPY",
    "WITHDRAW",
    "apply_trip_command",
    "new_trip_state",
    "trip_copy",
    "trip_event",
    "Trip",
    "TripDesk",
    "TripDirectory",
    "TripExecutor",
    "TripWorkflow",
]

TRIP = "trip"
LEGS = ("outbound", "return")

SET_NAME = "trip.set_name"
SET_EMAIL = "trip.set_email"
SET_TRAVEL_DATE = "trip.set_travel_date"
REQUEST_REBOOKING = "trip.request_rebooking"
CONFIRM_REBOOKING = "trip.confirm_rebooking"
KEEP_LEG = "trip.keep_leg"
WITHDRAW = "trip.withdraw"
#: the airline's answer to a rebooking, recorded on the trip (only ever from a verified callback)
RECORD_AIRLINE_ANSWER = "trip.record_airline_answer"
REBOOKED = "trip.rebooked"
REBOOKING_REFUSED = "trip.rebooking_refused"

#: The sample domain's copy: jinja2 templates and their Italian and German catalogs (English is
#: the templates' own language), kept up to date by `scripts/copy-catalogs`.
TRIP_COPY = CopyCatalog(
    domain="travel",
    templates=Path(__file__).resolve().parent / "travel_copy" / "templates",
    locales=Path(__file__).resolve().parent / "travel_copy" / "locale",
)

_TEMPLATE_IDS = frozenset(TRIP_COPY.template_sources())

#: What choosing each option of a trip's card does, as a narrator's `explain` says it
#: (`trip.option.<option id>`, given the card's metadata): the rebooking card's options, and the
#: runtime's confirmation card's (`opt_confirm`, `opt_decline`), which withdrawing a trip and
#: sending a rebooking share, so their words hold for both.
OPTION_EFFECTS = tuple(
    f"trip.option.{option}" for option in ("opt_rebook", "opt_keep", "opt_confirm", "opt_decline")
)


@functools.cache
def trip_copy() -> TemplateCopy:
    """The sample domain's copy over the library's, read once per process."""
    return TemplateCopy(TRIP_COPY)


_NAME = re.compile(r"^[^\W\d_][^\d@]{0,98}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def _refuse(code: str, template_id: str | None = None, **params: Any) -> DomainRefusal:
    """A refusal in the trip's copy: the template named by its code, unless another is named."""
    return DomainRefusal(
        code=code, explanation=Localized(template_id=template_id or code, params=params)
    )


#: what an open trip offers (the same every time: built once)
_LEG = ArgumentSpec(
    name="leg",
    description="outbound or return",
    value=ValueRule(kind=ValueKind.ENUM, choices=LEGS),
)
_OPERATIONS: tuple[OperationSpec, ...] = (
    OperationSpec(
        operation=SET_NAME,
        summary="Set the traveller's name",
        arguments=(ArgumentSpec(name="name", description="full name"),),
    ),
    OperationSpec(
        operation=SET_EMAIL,
        summary="Set the contact email",
        arguments=(
            ArgumentSpec(
                name="email",
                description="email address",
                value=ValueRule(kind=ValueKind.EMAIL),
            ),
        ),
    ),
    OperationSpec(
        operation=SET_TRAVEL_DATE,
        summary="Set the travel date",
        arguments=(
            ArgumentSpec(
                name="travel_date",
                description="YYYY-MM-DD",
                value=ValueRule(kind=ValueKind.DATE),
            ),
        ),
    ),
    OperationSpec(
        operation=REQUEST_REBOOKING,
        summary="Ask for a leg to be rebooked",
        arguments=(_LEG,),
    ),
    OperationSpec(operation=KEEP_LEG, summary="Keep a leg as booked", arguments=(_LEG,)),
    OperationSpec(operation=WITHDRAW, summary="Withdraw the trip"),
    OperationSpec(
        operation=CONFIRM_REBOOKING,
        summary="Send the rebooking to the airline",
        arguments=(_LEG,),
        proposable=False,
    ),
)


class TripWorkflow(Workflow):
    """The trip workflow (pure: no I/O, no clock)."""

    key = TRIP
    version = "1"

    def project(self, case_ref: CaseRef, state: Mapping[str, Any] | None) -> WorkflowView:
        if state is None:
            return WorkflowView(
                case_ref=case_ref,
                workflow_version=self.version,
                phase="not_started",
                phase_ownership=PhaseOwnership.SYSTEM,
            )
        label = state.get("label")
        if state.get("status") == "withdrawn":
            return WorkflowView(
                case_ref=case_ref,
                workflow_version=self.version,
                phase="withdrawn",
                phase_ownership=PhaseOwnership.TERMINAL,
                outcome={"withdrawn": True},
                label=label,
            )
        obligations = tuple(
            Obligation(key=key)
            for key, field_name in (
                ("provide_name", "name"),
                ("provide_email", "email"),
                ("provide_travel_date", "travel_date"),
            )
            if not state.get(field_name)
        )
        pending = state.get("rebooking")
        if pending:
            return WorkflowView(
                case_ref=case_ref,
                workflow_version=self.version,
                phase="awaiting_rebooking_confirmation",
                phase_ownership=PhaseOwnership.USER,
                obligations=obligations,
                blocking_interaction=InteractionRequirement(
                    key=f"confirm_rebooking:{pending['leg']}",
                    kind=InteractionKind.CONFIRM_COMMAND,
                    confirms_risk=RiskClass.EXTERNAL_REGULATED,
                    params={"leg": pending["leg"]},
                ),
                label=label,
            )
        return WorkflowView(
            case_ref=case_ref,
            workflow_version=self.version,
            phase="collecting",
            phase_ownership=PhaseOwnership.SYSTEM,
            obligations=obligations,
            label=label,
        )

    def operations(self, view: WorkflowView) -> Sequence[OperationSpec]:
        if view.phase in ("withdrawn", "not_started"):
            return ()
        return _OPERATIONS

    def compile(
        self, act: ResolvedAct, view: WorkflowView, state: Mapping[str, Any] | None
    ) -> Sequence[CompiledCommand] | DomainRefusal:
        if state is None or view.phase == "withdrawn":
            return _refuse("trip.closed")
        args = act.arguments
        op = act.operation
        if op == SET_NAME:
            name = str(args.get("name", "")).strip()
            if not _NAME.match(name):
                return _refuse("trip.invalid_name")
            return (
                []
                if name == state.get("name")
                else [CompiledCommand(command_type=op, payload={"name": name})]
            )
        if op == SET_EMAIL:
            email = str(args.get("email", "")).strip()
            if not _EMAIL.match(email):
                return _refuse("trip.invalid_email")
            return (
                []
                if email == state.get("email")
                else [CompiledCommand(command_type=op, payload={"email": email})]
            )
        if op == SET_TRAVEL_DATE:
            try:
                day = dt.date.fromisoformat(str(args.get("travel_date", ""))).isoformat()
            except ValueError:
                return _refuse("trip.invalid_date")
            if day == state.get("travel_date"):
                return []
            return [CompiledCommand(command_type=op, payload={"travel_date": day})]
        if op in (REQUEST_REBOOKING, KEEP_LEG, CONFIRM_REBOOKING):
            leg = args.get("leg")
            if leg not in LEGS:
                return _refuse("trip.unknown_leg")
            legs = state.get("legs", {})
            if op == KEEP_LEG:
                return [CompiledCommand(command_type=op, payload={"leg": leg})]
            if legs.get(leg, {}).get("kept"):
                return _refuse("trip.leg_kept", leg=leg)
            if legs.get(leg, {}).get("status") == "rebooking_sent":
                return _refuse("trip.already_sent", leg=leg)
            if legs.get(leg, {}).get("status") == "rebooked":
                return _refuse("trip.already_rebooked", leg=leg)
            if op == REQUEST_REBOOKING:
                if not (state.get("name") and state.get("email")):
                    return _refuse("trip.details_missing")
                return [CompiledCommand(command_type=op, payload={"leg": leg})]
            pending = state.get("rebooking") or {}
            if pending.get("leg") != leg:
                return _refuse("trip.nothing_to_confirm")
            return [CompiledCommand(command_type=op, payload={"leg": leg})]
        if op == WITHDRAW:
            return [CompiledCommand(command_type=op, payload={})]
        return _refuse("turnframe.operation.unknown", "trip.operation_unknown")

    def policy(self, command_type: str) -> CommandPolicy:
        if command_type in (SET_NAME, SET_EMAIL, SET_TRAVEL_DATE, REQUEST_REBOOKING, KEEP_LEG):
            return CommandPolicy.low_risk()
        if command_type == CONFIRM_REBOOKING:
            return CommandPolicy(
                risk=RiskClass.EXTERNAL_REGULATED,
                confirmation=ConfirmationPolicy.EXPLICIT_CLICK,
                atomicity=ExternalSaga(saga="airline"),
            )
        if command_type == RECORD_AIRLINE_ANSWER:  # only a verified callback may record it
            return CommandPolicy(
                risk=RiskClass.EXTERNAL_REGULATED,
                confirmation=ConfirmationPolicy.NONE,
                atomicity=PerCase(),
            )
        if command_type == WITHDRAW:
            return CommandPolicy(
                risk=RiskClass.DESTRUCTIVE,
                confirmation=ConfirmationPolicy.EXPLICIT_CLICK,
                atomicity=PerCase(),
            )
        return CommandPolicy.conservative()

    def copy_templates(self) -> Sequence[str]:
        """Every template of the trip's copy, and the option effects even were their files gone
        (the start check wants each in every locale)."""
        return sorted(_TEMPLATE_IDS.union(OPTION_EFFECTS))

    def receipt_templates(self) -> Sequence[str]:
        return (*_EVENT_TYPES.values(), REBOOKED, REBOOKING_REFUSED)

    def external_answer(
        self, request: OutboxRequest, result: SendCompleted | SendFailed
    ) -> CompiledCommand | None:
        """The airline's answer to a rebooking, recorded on the trip."""
        if request.command_type != CONFIRM_REBOOKING:
            return None
        leg = str(request.payload.get("leg", ""))
        if isinstance(result, SendCompleted):
            answer = {"leg": leg, "outcome": "rebooked", "reference": result.reference}
        else:
            answer = {"leg": leg, "outcome": "refused", "code": result.code}
        return CompiledCommand(command_type=RECORD_AIRLINE_ANSWER, payload=answer)

    def receipt_claims(self) -> Mapping[str, Sequence[ClaimClass]]:
        """What each receipt lets prose beside it claim. A rebooking sent to the airline is a
        submission, not a rebooking (the airline has not answered); a rebooking prepared for
        confirmation backs no outcome at all."""
        changed = (ClaimClass.UPDATE, ClaimClass.COMPLETION)
        return {
            _EVENT_TYPES[SET_NAME]: changed,
            _EVENT_TYPES[SET_EMAIL]: changed,
            _EVENT_TYPES[SET_TRAVEL_DATE]: changed,
            _EVENT_TYPES[REQUEST_REBOOKING]: (),
            _EVENT_TYPES[CONFIRM_REBOOKING]: (ClaimClass.SUBMISSION,),
            _EVENT_TYPES[KEEP_LEG]: changed,
            _EVENT_TYPES[WITHDRAW]: (ClaimClass.DELETION, ClaimClass.COMPLETION),
            REBOOKED: changed,
            REBOOKING_REFUSED: (),
        }

    def follow_up_receipts(self) -> Sequence[str]:
        """A rebooking sent to the airline: its answer follows, and the traveller hears of it."""
        return (_EVENT_TYPES[CONFIRM_REBOOKING],)

    def follow_up_pending(self, state: Mapping[str, Any] | None) -> bool:
        """A leg sent to the airline whose answer has not come: the traveller still hears of it."""
        legs = (state or {}).get("legs") or {}
        return any(leg.get("status") == "rebooking_sent" for leg in legs.values())

    def receipts(self, events: Sequence[DomainEvent]) -> Sequence[ReceiptSpec]:
        return [
            ReceiptSpec(
                status_code=event.event_type,
                template_id=event.event_type,
                params=dict(event.payload),
                event_ids=(event.event_id,),
                # the airline's refusal is recorded on the trip, and is not a success
                severity=ReceiptSeverity.ERROR
                if event.event_type == REBOOKING_REFUSED
                else ReceiptSeverity.SUCCESS,
            )
            for event in events
        ]

    def obligation_sentence(self, obligation: Obligation, locale: str) -> Localized | None:
        template = f"trip.obligation.{obligation.key}"
        return Localized(template_id=template) if template in _TEMPLATE_IDS else None

    def narratable_state(self, state: Mapping[str, Any] | None) -> Mapping[str, Any]:
        if state is None:
            return {}
        legs = state.get("legs", {})
        return {
            "name": state.get("name"),
            "email": state.get("email"),
            "travel_date": state.get("travel_date"),
            **{f"{leg}_flight": _leg_words(legs.get(leg, {})) for leg in LEGS},
        }

    def next_steps(self, view: WorkflowView) -> Sequence[NextStep]:
        if view.phase != "collecting" or view.obligations:
            return ()
        words = Localized(template_id="trip.next.rebook")
        return (NextStep(operation=REQUEST_REBOOKING, words=words, arguments={}),)

    def build_interaction(
        self,
        requirement: InteractionRequirement,
        view: WorkflowView,
        state: Mapping[str, Any] | None,
    ) -> InteractionPayload:
        leg = requirement.params["leg"]
        return InteractionPayload(
            title=Localized(template_id="trip.card.rebook.title", params={"leg": leg}),
            body=Localized(template_id="trip.card.rebook.body"),
            options=(
                InteractionOption(
                    option_id="opt_rebook",
                    label=Localized(template_id="trip.card.rebook.confirm"),
                    style=OptionStyle.PRIMARY,
                    action=ApplyOperation(operation=CONFIRM_REBOOKING, arguments={"leg": leg}),
                ),
                InteractionOption(
                    option_id="opt_keep",
                    label=Localized(template_id="trip.card.rebook.keep"),
                    action=DeclineAndRecord(operation=KEEP_LEG, arguments={"leg": leg}),
                ),
            ),
            metadata={"leg": leg},
        )


def _leg_words(leg: Mapping[str, Any]) -> str:
    if leg.get("kept"):
        return "kept as booked"
    return {
        "rebooking_sent": "rebooking sent to the airline",
        "rebooked": "rebooked by the airline",
        "rebooking_refused": "rebooking refused by the airline",
    }.get(leg.get("status", ""), "booked")


# --- the domain's own database, directory and executor -----------------------------------------


@dataclass
class Trip:
    account_id: str
    trip_id: str
    state: dict[str, Any]
    revision: int = 1
    conversations: set[str] = field(default_factory=set)


def new_trip_state(label: str, **fields: Any) -> dict[str, Any]:
    """A trip just opened: both legs booked, nothing owed filled in (`fields` override)."""
    return {
        "label": label,
        "name": None,
        "email": None,
        "travel_date": None,
        "legs": {leg: {"status": "booked", "kept": False} for leg in LEGS},
        "rebooking": None,
        "status": "open",
        "locked": False,
        **fields,
    }


class TripDesk:
    """The travel desk's own records (what an adopter keeps in its own database)."""

    def __init__(self) -> None:
        self.trips: dict[tuple[str, str], Trip] = {}
        self.by_conversation: dict[tuple[str, str], list[str]] = {}

    def open_trip(
        self,
        account_id: str,
        trip_id: str,
        label: str,
        *,
        conversation_id: str | None = None,
        **fields: Any,
    ) -> Trip:
        trip = Trip(account_id=account_id, trip_id=trip_id, state=new_trip_state(label, **fields))
        if conversation_id:
            trip.conversations.add(conversation_id)
            self.by_conversation.setdefault((account_id, conversation_id), []).append(trip_id)
        self.trips[(account_id, trip_id)] = trip
        return trip

    def trip(self, account_id: str, trip_id: str) -> Trip | None:
        return self.trips.get((account_id, trip_id))

    def touch(self, account_id: str, trip_id: str, **fields: Any) -> Trip:
        """Someone else changed the trip (a desk agent): new state, new revision."""
        trip = self.trips[(account_id, trip_id)]
        trip.state.update(fields)
        trip.revision += 1
        return trip


class TripDirectory:
    """Which trips a conversation may address; every trip belongs to exactly one account."""

    def __init__(self, desk: TripDesk) -> None:
        self.desk = desk

    async def candidates(self, account_id: str, conversation_id: str) -> Sequence[CaseCandidate]:
        """The trips opened in this conversation, by trip id."""
        trip_ids = sorted(self.desk.by_conversation.get((account_id, conversation_id), ()))
        trips = [self.desk.trips[(account_id, trip_id)] for trip_id in trip_ids]
        return [
            CaseCandidate(
                case=CaseKey(workflow=TRIP, case_id=trip.trip_id), label=trip.state["label"]
            )
            for trip in trips
        ]

    async def authorize(self, account_id: str, case: CaseKey) -> bool:
        return case.workflow == TRIP and self.desk.trip(account_id, case.case_id) is not None

    async def load(self, account_id: str, case: CaseKey) -> LoadedCase:
        trip = self.desk.trip(account_id, case.case_id)
        if trip is None:
            return LoadedCase(case=case, revision=0, state=None)
        return LoadedCase(case=case, revision=trip.revision, state=copy.deepcopy(trip.state))

    async def find(self, account_id: str, workflow: str, name: str) -> Sequence[CaseCandidate]:
        return [c for c in await self.candidates_for_account(account_id) if c.label == name]

    async def candidates_for_account(self, account_id: str) -> list[CaseCandidate]:
        return [
            CaseCandidate(
                case=CaseKey(workflow=TRIP, case_id=trip.trip_id), label=trip.state["label"]
            )
            for (account, _), trip in sorted(self.desk.trips.items())
            if account == account_id
        ]


_EVENT_TYPES = {
    SET_NAME: "trip.name_set",
    SET_EMAIL: "trip.email_set",
    SET_TRAVEL_DATE: "trip.travel_date_set",
    REQUEST_REBOOKING: "trip.rebooking_requested",
    CONFIRM_REBOOKING: "trip.rebooking_sent",
    KEEP_LEG: "trip.leg_kept",
    WITHDRAW: "trip.withdrawn",
}


def _event_type(command_type: str, payload: Mapping[str, Any]) -> str:
    if command_type == RECORD_AIRLINE_ANSWER:
        return REBOOKED if payload.get("outcome") == "rebooked" else REBOOKING_REFUSED
    return _EVENT_TYPES[command_type]


def trip_event(envelope: CommandEnvelope, new_revision: int, occurred_at: int) -> DomainEvent:
    """The event a trip command leaves (its id derives from the command's idempotency key)."""
    return DomainEvent(
        event_id=derive_id("evt", "turnframe_test.trip.event", {"key": envelope.idempotency_key}),
        account_id=envelope.account_id,
        workflow=TRIP,
        case_id=envelope.case_ref.case_id,
        case_revision=new_revision,
        command_id=envelope.command_id,
        event_type=_event_type(envelope.command_type, envelope.payload),
        payload=dict(envelope.payload),
        occurred_at=occurred_at,
    )


class ProcessCrash(BaseException):
    """The process dies here: nothing after it runs (no handler a program would write catches a
    `BaseException` that is not an `Exception`), and recovery finishes the turn."""


class TripExecutor(Executor):
    """Applies trip commands to the desk, all or nothing per batch, idempotent per envelope key.

    `timeouts` names command types whose execution times out (the airline never answers);
    `clock_ms` stamps events.
    """

    def __init__(self, desk: TripDesk, *, clock_ms: Any = None) -> None:
        self.desk = desk
        self.clock_ms = clock_ms or (lambda: 1_800_000_000_000)
        self.results: dict[str, tuple[Any, ExecutionResult]] = {}
        self.timeouts: set[str] = set()
        self.executed: list[str] = []
        #: how many times each idempotency key took effect (never more than once)
        self.applied: Counter[str] = Counter()
        self._before: deque[BaseException] = deque()
        self._after: deque[BaseException] = deque()

    def arm_before_remote_request(self, error: BaseException) -> None:
        """The next batch raises `error` before anything is applied."""
        self._before.append(error)

    def arm_after_remote_request(self, error: BaseException) -> None:
        """The next batch that takes effect raises `error` after applying (the answer is lost:
        an exception is an unknown outcome; a `ProcessCrash` is the process dying there)."""
        self._after.append(error)

    def disarm(self) -> int:
        """Drop the faults armed and not fired; returns how many there were."""
        left = len(self._before) + len(self._after)
        self._before.clear()
        self._after.clear()
        return left

    async def outcome(self, idempotency_key: str) -> ExecutionResult | None:
        """What became of a command: its result when it took effect, None when it never did
        (this executor applies a batch before it answers, so an unknown key never will)."""
        known = self.results.get(idempotency_key)
        if known is None:
            return None
        result = known[1]
        return ExecutionResult(
            new_revision=result.new_revision, events=result.events, replayed=True
        )

    async def execute(self, batch: CommandBatch) -> ExecutionResult:
        if self._before:
            raise self._before.popleft()
        envelopes = batch.envelopes
        known = [self.results.get(e.idempotency_key) for e in envelopes]
        if all(known):
            for envelope, (command, _) in zip(envelopes, known, strict=True):  # type: ignore[misc]
                if command != (envelope.case_ref, envelope.command_type, envelope.payload):
                    raise ExecutionFailed("idempotency_mismatch")
            first = known[0][1]  # type: ignore[index]
            replayed = tuple(ev for _, result in known for ev in result.events)  # type: ignore[misc]
            return ExecutionResult(new_revision=first.new_revision, events=replayed, replayed=True)
        if any(known):
            raise ExecutionFailed("partially_replayed_batch")
        account = envelopes[0].account_id
        trip_id = envelopes[0].case_ref.case_id
        trip = self.desk.trip(account, trip_id)
        if trip is None:
            raise ExecutionRejected("trip.not_found", "There is no such trip.")
        for envelope in envelopes:
            if envelope.case_ref.expected_revision != trip.revision:
                raise RevisionConflict(trip.revision)
        for envelope in envelopes:
            if envelope.command_type in self.timeouts:
                raise ExecutionTimeout("the airline did not answer in time")
        state = copy.deepcopy(trip.state)
        if state.get("locked"):
            raise ExecutionRejected("trip.locked", "This trip is locked by the travel desk.")
        new_revision = trip.revision + 1
        events: list[DomainEvent] = []
        per_envelope: list[ExecutionResult] = []
        for envelope in envelopes:
            apply_trip_command(state, envelope.command_type, envelope.payload)
            event = trip_event(envelope, new_revision, self.clock_ms())
            events.append(event)
            per_envelope.append(ExecutionResult(new_revision=new_revision, events=(event,)))
        trip.state = state
        trip.revision = new_revision
        for envelope, result in zip(envelopes, per_envelope, strict=True):
            self.results[envelope.idempotency_key] = (
                (envelope.case_ref, envelope.command_type, envelope.payload),
                result,
            )
            self.executed.append(envelope.command_type)
            self.applied[envelope.idempotency_key] += 1
        if self._after:
            raise self._after.popleft()
        return ExecutionResult(new_revision=new_revision, events=tuple(events))


def apply_trip_command(
    state: dict[str, Any], command_type: str, payload: Mapping[str, Any]
) -> None:
    """One command applied to a trip's state (the executor's rule, shared by both desks). A
    withdrawn trip takes no change from its traveller, but the airline's answer to a rebooking
    sent before is a fact from outside: it is recorded there too, never lost."""
    if state.get("status") == "withdrawn" and command_type != RECORD_AIRLINE_ANSWER:
        raise ExecutionRejected("trip.closed", "This trip is closed.")
    if command_type in (SET_NAME, SET_EMAIL, SET_TRAVEL_DATE):
        state.update(payload)
    elif command_type == REQUEST_REBOOKING:
        if state["legs"][payload["leg"]]["kept"]:
            raise ExecutionRejected("trip.leg_kept", "That flight is kept as booked.")
        state["rebooking"] = {"leg": payload["leg"]}
    elif command_type == CONFIRM_REBOOKING:
        if (state.get("rebooking") or {}).get("leg") != payload["leg"]:
            raise ExecutionRejected("trip.nothing_to_confirm", "No rebooking is waiting.")
        state["legs"][payload["leg"]]["status"] = "rebooking_sent"
        state["rebooking"] = None
    elif command_type == KEEP_LEG:
        state["legs"][payload["leg"]]["kept"] = True
        if (state.get("rebooking") or {}).get("leg") == payload["leg"]:
            state["rebooking"] = None
    elif command_type == WITHDRAW:
        state["status"] = "withdrawn"
        state["rebooking"] = None
    elif command_type == RECORD_AIRLINE_ANSWER:
        leg = state["legs"][payload["leg"]]
        if payload.get("outcome") == "rebooked":
            leg.update(status="rebooked", reference=payload.get("reference"))
        else:
            leg.update(status="rebooking_refused")
    else:
        raise ExecutionRejected("turnframe.operation.unknown", "Unknown command.")
