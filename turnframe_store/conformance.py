"""The store conformance suite: named checks every implementation of the store roles passes.

    report = await run_all(factory)   # factory() -> Awaitable[Stores]; a fresh store per check
    assert report.passed, report.describe()

Each check is a plain `async def check_<sentence>(stores)` that uses only the public protocols,
so any implementation (memory, SQLite, PostgreSQL, an adopter's own) runs the same suite. A failed
expectation raises `AssertionError`; `run_all` and `run_check` record it and never raise.
The checks choose every time they pass in (`created_at`, `now`, …); the store clock is never
assumed, so a store stamping lifecycle times with the wall clock passes too.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from turnframe_core import codes
from turnframe_core.blocks import AnswerBlock
from turnframe_core.cases import CaseRef
from turnframe_core.commands import CommandEnvelope, InternalPolicy
from turnframe_core.errors import TurnframeError
from turnframe_core.events import DomainEvent
from turnframe_core.ids import derive_block_id, derive_replay_token
from turnframe_core.interactions import (
    Interaction,
    InteractionKind,
    InteractionOption,
    InteractionPayload,
    InteractionStatus,
    ResolveClarification,
)
from turnframe_core.replay import (
    AwaitingConfirmationOutcome,
    CommittedOutcome,
    FailedOutcome,
    OutcomeUnknown,
    RejectedOutcome,
    ReplayRecord,
    TurnPhase,
)
from turnframe_core.turn import AssistantTurn, TurnInput, TurnStatus
from turnframe_store.bundle import Stores
from turnframe_store.errors import Conflict, InvalidRecord, NotFound, StoreError
from turnframe_store.records import (
    CaseInvalidation,
    CommitBundle,
    EventCursor,
    Fresh,
    InteractionFinish,
    JournalCompletion,
    JournalEntry,
    JournalStatus,
    OutboxEntry,
    OutboxStatus,
    Replay,
    UserTurnRecord,
)

__all__ = [
    "CHECKS",
    "Check",
    "CheckResult",
    "ConformanceReport",
    "StoresFactory",
    "run_all",
    "run_check",
]

StoresFactory = Callable[[], Awaitable[Stores]]
Check = Callable[[Stores], Awaitable[None]]
E = TypeVar("E", bound=StoreError)

_REGISTRY: dict[str, Check] = {}


def _check(check: Check) -> Check:
    _REGISTRY[check.__name__] = check
    return check


# --- report -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    detail: str = ""
    duration_ms: float = 0.0


@dataclass(frozen=True)
class ConformanceReport:
    results: tuple[CheckResult, ...]

    @property
    def passed(self) -> bool:
        return all(result.passed for result in self.results)

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        return tuple(result for result in self.results if not result.passed)

    @property
    def failed_names(self) -> tuple[str, ...]:
        return tuple(result.name for result in self.failures)

    def describe(self) -> str:
        """One line per check (PASS/FAIL, name, and why it failed), after a count."""
        passed = sum(result.passed for result in self.results)
        lines = [f"{passed}/{len(self.results)} store conformance checks passed"]
        for result in self.results:
            mark = "PASS" if result.passed else "FAIL"
            why = f": {result.detail}" if result.detail else ""
            lines.append(f"{mark} {result.name} ({result.duration_ms:.1f} ms){why}")
        return "\n".join(lines)


async def run_check(name: str, factory: StoresFactory, *, timeout_s: float = 60.0) -> CheckResult:
    """Run one check on a fresh store from `factory`; every failure is captured, never raised."""
    check = _REGISTRY.get(name)
    if check is None:
        return CheckResult(name, False, "no such conformance check")
    started = time.perf_counter()

    def result(detail: str = "") -> CheckResult:
        elapsed = (time.perf_counter() - started) * 1000
        return CheckResult(name, not detail, detail, elapsed)

    try:
        stores = await factory()
    except Exception as exc:
        return result(f"the store factory failed: {type(exc).__name__}: {exc}")
    try:
        await asyncio.wait_for(check(stores), timeout_s)
    except AssertionError as exc:
        return result(str(exc) or "an expectation failed")
    except TimeoutError:
        return result(f"did not finish within {timeout_s} s")
    except Exception as exc:
        return result(f"unexpected {type(exc).__name__}: {exc}")
    finally:
        with contextlib.suppress(Exception):  # closing is best effort; the verdict stands
            await stores.aclose()
    return result()


async def run_all(
    factory: StoresFactory, *, names: Iterable[str] | None = None, timeout_s: float = 60.0
) -> ConformanceReport:
    """Run every check (or the named ones), each on a fresh store; never raises."""
    selected = tuple(names) if names is not None else CHECKS
    results = [await run_check(name, factory, timeout_s=timeout_s) for name in selected]
    return ConformanceReport(tuple(results))


# --- expectations -------------------------------------------------------------------------------


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 400 else text[:400] + "…"


def _equal(actual: Any, expected: Any, what: str) -> None:
    if actual != expected:
        raise AssertionError(f"{what}: expected {_show(expected)}, got {_show(actual)}")


def _increasing(values: Sequence[int]) -> bool:
    return all(a < b for a, b in itertools.pairwise(values))


def _true(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(what)


async def _refused(kind: type[E], action: Awaitable[object], what: str) -> E:
    """Await `action`, which must raise `kind` (or a subclass); return the error."""
    try:
        await action
    except kind as exc:
        return exc
    except StoreError as exc:
        raise AssertionError(
            f"{what}: expected {kind.__name__}, got {type(exc).__name__} ({exc.code})"
        ) from None
    raise AssertionError(f"{what}: expected {kind.__name__}, but it was accepted")


# --- test data (no domain words) ----------------------------------------------------------------

_A: Final = "acct_a"
_B: Final = "acct_b"
_T0: Final = 1_700_000_000_000
_WORKFLOW: Final = "conformance.case"
_DESTINATION: Final = "conformance.remote"
_CARD_LIFECYCLE: Final = {"status", "resolved_at", "resolved_option_id", "resolution_event_ids"}


def _case(case_id: str = "case-1", revision: int = 1) -> CaseRef:
    return CaseRef(workflow=_WORKFLOW, case_id=case_id, expected_revision=revision)


def _card(
    interaction_id: str,
    *,
    account: str = _A,
    conversation: str = "conv_1",
    case: CaseRef | None = None,
    blocking: bool = True,
    revision_independent: bool = False,
    created_at: int = _T0,
    expires_at: int | None = None,
    turn: str = "turn_1",
    title: str = "Pick one",
) -> Interaction:
    options = tuple(
        InteractionOption(
            option_id=f"opt_{key}",
            label=key.capitalize(),
            action=ResolveClarification(answer_key=key),
        )
        for key in ("yes", "no")
    )
    return Interaction.create(
        interaction_id=interaction_id,
        account_id=account,
        conversation_id=conversation,
        case_ref=case or _case(),
        kind=InteractionKind.SINGLE_SELECT,
        payload=InteractionPayload(title=title, options=options),
        created_by_turn=turn,
        created_at=created_at,
        blocking=blocking,
        revision_independent=revision_independent,
        expires_at=expires_at,
    )


def _entry(
    command_id: str,
    *,
    account: str = _A,
    turn: str = "turn_1",
    case: CaseRef | None = None,
    payload: dict[str, Any] | None = None,
    created_at: int = _T0,
    status: JournalStatus = JournalStatus.PENDING,
) -> JournalEntry:
    envelope = CommandEnvelope.build(
        command_id=command_id,
        turn_id=turn,
        account_id=account,
        case_ref=case or _case(),
        origin=InternalPolicy(policy_key="conformance"),
        command_type="conformance.note",
        payload=payload if payload is not None else {"note": command_id},
    )
    return JournalEntry.from_envelope(envelope, now=created_at, status=status)


def _event(
    event_id: str,
    *,
    account: str = _A,
    case_id: str = "case-1",
    revision: int = 1,
    command: str = "cmd_1",
) -> DomainEvent:
    return DomainEvent(
        event_id=event_id,
        account_id=account,
        workflow=_WORKFLOW,
        case_id=case_id,
        case_revision=revision,
        command_id=command,
        event_type="conformance.noted",
        payload={"event": event_id, "text": "naïve café"},
        occurred_at=_T0,
    )


def _user_turn(
    turn: str,
    *,
    account: str = _A,
    conversation: str = "conv_1",
    received_at: int = _T0,
    text: str = "hello",
) -> UserTurnRecord:
    return UserTurnRecord(
        account_id=account,
        conversation_id=conversation,
        turn_id=turn,
        received_at=received_at,
        input=TurnInput(account_id=account, conversation_id=conversation, turn_id=turn, text=text),
    )


async def _start_turn(
    stores: Stores, turn: str, *, account: str = _A, conversation: str = "conv_1"
) -> None:
    await stores.conversations.ensure_conversation(account, conversation)
    await stores.conversations.append_user_turn(
        _user_turn(turn, account=account, conversation=conversation)
    )


def _assistant_turn(
    turn: str,
    *,
    account: str = _A,
    conversation: str = "conv_1",
    text: str = "Già fatto — «done», 100 %.",
) -> AssistantTurn:
    started = AssistantTurn.begin(
        turn_id=turn, conversation_id=conversation, account_id=account, locale="it", created_at=_T0
    )
    answer = AnswerBlock(block_id=derive_block_id(turn, "answer:q1"), text=text)
    return started.finish(TurnStatus.COMPLETED, at=_T0 + 5, blocks=(answer,))


def _outbox_row(
    outbox_id: str,
    *,
    command: str = "cmd_1",
    key: str | None = None,
    destination: str = _DESTINATION,
    created_at: int = _T0,
    next_attempt_at: int | None = None,
) -> OutboxEntry:
    return OutboxEntry(
        outbox_id=outbox_id,
        command_id=command,
        destination=destination,
        payload={"row": outbox_id},
        idempotency_key=key or f"key-{outbox_id}",
        created_at=created_at,
        next_attempt_at=next_attempt_at,
    )


def _replay(
    turn: str,
    *,
    account: str = _A,
    conversation: str = "conv_1",
    phase: TurnPhase = TurnPhase.RECEIVED,
    recorded_at: int = _T0,
) -> ReplayRecord:
    return ReplayRecord(
        turn_id=turn,
        conversation_id=conversation,
        account_id=account,
        replay_token=derive_replay_token(turn),
        phase=phase,
        recorded_at=recorded_at,
        input=TurnInput(account_id=account, conversation_id=conversation, turn_id=turn, text="hi"),
    )


def _ids(records: Iterable[Any], field: str) -> list[str]:
    return [getattr(record, field) for record in records]


async def _status(stores: Stores, account: str, interaction_id: str) -> InteractionStatus:
    return (await stores.interactions.get(account, interaction_id)).status


# --- conversations and turns --------------------------------------------------------------------


@_check
async def check_a_user_turn_is_recorded_once_with_its_received_phase(stores: Stores) -> None:
    conversations = stores.conversations
    await _refused(
        NotFound,
        conversations.append_user_turn(_user_turn("turn_1")),
        "a user turn in a conversation that does not exist",
    )
    created = await conversations.ensure_conversation(_A, "conv_1")
    _equal(await conversations.ensure_conversation(_A, "conv_1"), created, "ensuring it again")
    _equal(await conversations.get_conversation(_A, "conv_1"), created, "the conversation")
    record = _user_turn("turn_1")
    await conversations.append_user_turn(record)
    _equal(await conversations.get_user_turn(_A, "turn_1"), record, "the stored user turn")
    marker = await conversations.get_phase(_A, "turn_1")
    _equal(
        (marker.phase, marker.conversation_id),
        (TurnPhase.RECEIVED, "conv_1"),
        "the marker a new turn gets",
    )
    await _refused(Conflict, conversations.append_user_turn(record), "the same turn again")
    await _refused(
        Conflict,
        conversations.append_user_turn(_user_turn("turn_1", text="something else")),
        "another user turn under a stored turn id",
    )
    _equal(await conversations.get_user_turn(_A, "turn_1"), record, "the user turn after both")
    await _refused(
        NotFound, conversations.get_assistant_turn(_A, "turn_1"), "an answer not yet stored"
    )


@_check
async def check_an_assistant_turn_is_written_once_and_reloads_identical(stores: Stores) -> None:
    conversations = stores.conversations
    await _start_turn(stores, "turn_1")
    turn = _assistant_turn("turn_1")
    await conversations.append_assistant_turn(_A, turn)
    loaded = await conversations.get_assistant_turn(_A, "turn_1")
    _equal(loaded.to_stored_json(), turn.to_stored_json(), "the reloaded turn's bytes")
    _equal(loaded, turn, "the reloaded turn")
    await conversations.append_assistant_turn(_A, turn)
    await _refused(
        Conflict,
        conversations.append_assistant_turn(_A, _assistant_turn("turn_1", text="Other words.")),
        "a different assistant turn under a stored turn id",
    )
    reloaded = await conversations.get_assistant_turn(_A, "turn_1")
    _equal(reloaded.to_stored_json(), turn.to_stored_json(), "the turn after a refused rewrite")
    await _refused(
        NotFound,
        conversations.append_assistant_turn(_A, _assistant_turn("turn_missing")),
        "an assistant turn without its user turn",
    )
    await _start_turn(stores, "turn_2")
    streaming = AssistantTurn.begin(
        turn_id="turn_2", conversation_id="conv_1", account_id=_A, locale="en", created_at=_T0
    )
    await _refused(
        InvalidRecord,
        conversations.append_assistant_turn(_A, streaming),
        "an assistant turn still streaming",
    )
    await conversations.append_assistant_turn(
        _A, _assistant_turn("turn_2"), phase=TurnPhase.DELIVERED
    )
    _equal(
        (await conversations.get_phase(_A, "turn_2")).phase,
        TurnPhase.DELIVERED,
        "the phase folded into the assistant turn's write",
    )


@_check
async def check_the_phase_marker_never_leaves_a_terminal_phase(stores: Stores) -> None:
    conversations = stores.conversations
    await _start_turn(stores, "turn_1")
    executing = await conversations.set_phase(_A, "turn_1", TurnPhase.EXECUTING)
    _equal(executing.phase, TurnPhase.EXECUTING, "the moved marker")
    _equal(await conversations.get_phase(_A, "turn_1"), executing, "the stored marker")
    delivered = await conversations.set_phase(_A, "turn_1", TurnPhase.DELIVERED)
    _equal(
        await conversations.set_phase(_A, "turn_1", TurnPhase.DELIVERED),
        delivered,
        "the same final phase again",
    )
    for phase in (TurnPhase.FAILED, TurnPhase.EXECUTING, TurnPhase.RECEIVED):
        await _refused(
            Conflict,
            conversations.set_phase(_A, "turn_1", phase),
            f"moving a delivered turn to {phase.value}",
        )
    _equal(await conversations.get_phase(_A, "turn_1"), delivered, "the final marker")
    await _refused(
        NotFound,
        conversations.set_phase(_A, "turn_missing", TurnPhase.EXECUTING),
        "the marker of a turn that does not exist",
    )


@_check
async def check_unfinished_turns_are_listed_after_an_interruption(stores: Stores) -> None:
    conversations = stores.conversations
    for turn in ("turn_1", "turn_2", "turn_3", "turn_4", "turn_5"):
        await _start_turn(stores, turn)
    await _start_turn(stores, "turn_6", account=_B)
    await conversations.set_phase(_A, "turn_2", TurnPhase.EXECUTING)
    await conversations.set_phase(_A, "turn_3", TurnPhase.DELIVERED)
    await conversations.set_phase(_A, "turn_4", TurnPhase.FAILED)
    await conversations.set_phase(_B, "turn_6", TurnPhase.COMPOSED)
    unfinished = await conversations.list_unfinished_turns(10)
    _equal(
        sorted((m.account_id, m.turn_id, m.phase) for m in unfinished),
        [
            (_A, "turn_1", TurnPhase.RECEIVED),
            (_A, "turn_2", TurnPhase.EXECUTING),
            (_A, "turn_5", TurnPhase.RECEIVED),
            (_B, "turn_6", TurnPhase.COMPOSED),
        ],
        "the unfinished turns of every account",
    )
    order = [(m.updated_at, m.account_id, m.turn_id) for m in unfinished]
    _equal(order, sorted(order), "the sort key (updated_at, account_id, turn_id)")
    _equal(
        await conversations.list_unfinished_turns(2), unfinished[:2], "the first two by that key"
    )


# --- interactions -------------------------------------------------------------------------------


@_check
async def check_a_second_open_blocking_card_for_a_case_is_a_conflict(stores: Stores) -> None:
    cards = stores.interactions
    await cards.insert(_card("int_first"))
    await _refused(
        Conflict, cards.insert(_card("int_second")), "a second blocking card for the case"
    )
    await _refused(NotFound, cards.get(_A, "int_second"), "the refused card")
    await cards.insert(_card("int_side", blocking=False))
    await cards.insert(_card("int_other_case", case=_case("case-2")))
    await cards.insert(_card("int_other_account", account=_B))
    await cards.begin_resolution(_A, "int_first", "opt_yes")
    await _refused(
        Conflict,
        cards.insert(_card("int_while_resolving")),
        "a blocking card while the case's card is resolving",
    )
    await cards.finish(_A, "int_first", InteractionStatus.RESOLVED, "opt_yes")
    await cards.insert(_card("int_next"))
    _equal(await _status(stores, _A, "int_next"), InteractionStatus.ACTIVE, "the next card")


@_check
async def check_a_blocking_card_is_replaced_only_while_it_is_active(stores: Stores) -> None:
    cards = stores.interactions
    await cards.insert(_card("int_old"))
    replaced = await cards.insert_replacing_blocking(_card("int_new", created_at=_T0 + 1))
    _equal(replaced, ("int_old",), "the replaced cards")
    _equal(await _status(stores, _A, "int_old"), InteractionStatus.INVALIDATED, "the old card")
    _equal(
        _ids(await cards.open_for_conversation(_A, "conv_1"), "interaction_id"),
        ["int_new"],
        "the open cards after the replacement",
    )
    await cards.begin_resolution(_A, "int_new", "opt_yes")
    await _refused(
        Conflict,
        cards.insert_replacing_blocking(_card("int_newer", created_at=_T0 + 2)),
        "replacing a card that is being resolved",
    )
    await _refused(NotFound, cards.get(_A, "int_newer"), "the refused replacement")
    _equal(await _status(stores, _A, "int_new"), InteractionStatus.RESOLVING, "the resolving card")
    _equal(
        await cards.insert_replacing_blocking(_card("int_alone", case=_case("case-2"))),
        (),
        "replacing where there is no blocking card",
    )


@_check
async def check_card_resolution_is_compare_and_swap_and_a_repeat_is_accepted(
    stores: Stores,
) -> None:
    cards = stores.interactions
    await cards.insert(_card("int_1"))
    claimed = await cards.begin_resolution(_A, "int_1", "opt_yes")
    _equal(
        (claimed.status, claimed.resolved_option_id),
        (InteractionStatus.RESOLVING, "opt_yes"),
        "the claimed card",
    )
    for option in ("opt_yes", "opt_no"):
        await _refused(
            Conflict, cards.begin_resolution(_A, "int_1", option), "a second claim of the card"
        )
    await _refused(
        Conflict,
        cards.finish(_A, "int_1", InteractionStatus.RESOLVED, "opt_no", ("evt_1",)),
        "settling with an option that was not claimed",
    )
    resolved = await cards.finish(_A, "int_1", InteractionStatus.RESOLVED, "opt_yes", ("evt_1",))
    _equal(
        (resolved.status, resolved.resolved_option_id, resolved.resolution_event_ids),
        (InteractionStatus.RESOLVED, "opt_yes", ("evt_1",)),
        "the resolved card",
    )
    again = await cards.finish(_A, "int_1", InteractionStatus.RESOLVED, "opt_yes", ("evt_1",))
    _equal(again, resolved, "the same settlement again")
    refusals: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        (
            "resolving with other events",
            lambda: cards.finish(_A, "int_1", InteractionStatus.RESOLVED, "opt_yes", ("evt_2",)),
        ),
        ("failing a resolved card", lambda: cards.finish(_A, "int_1", InteractionStatus.FAILED)),
        ("declining a resolved card", lambda: cards.decline(_A, "int_1")),
        ("claiming a resolved card", lambda: cards.begin_resolution(_A, "int_1", "opt_yes")),
    ]
    for what, action in refusals:
        await _refused(Conflict, action(), what)
    _equal(await cards.get(_A, "int_1"), resolved, "the resolved card after refused moves")

    await cards.insert(_card("int_2", case=_case("case-2")))
    outcomes = await asyncio.gather(
        *(cards.begin_resolution(_A, "int_2", "opt_yes") for _ in range(6)),
        return_exceptions=True,
    )
    unexpected = [
        o for o in outcomes if isinstance(o, BaseException) and not isinstance(o, Conflict)
    ]
    if unexpected:
        raise unexpected[0]
    winners = [o for o in outcomes if isinstance(o, Interaction)]
    _equal(len(winners), 1, "concurrent claims of one card that win")
    released = await cards.finish(_A, "int_2", InteractionStatus.ACTIVE)
    _equal(
        (released.status, released.resolved_option_id),
        (InteractionStatus.ACTIVE, None),
        "a released card",
    )
    await cards.begin_resolution(_A, "int_2", "opt_no")
    failed = await cards.finish(_A, "int_2", InteractionStatus.FAILED)
    _equal(failed.status, InteractionStatus.FAILED, "a failed resolution")
    _equal(await cards.finish(_A, "int_2", InteractionStatus.FAILED), failed, "failing it again")

    await cards.insert(_card("int_3", case=_case("case-3")))
    await _refused(
        InvalidRecord,
        cards.begin_resolution(_A, "int_3", "opt_unknown"),
        "claiming an option the card does not offer",
    )
    declined = await cards.decline(_A, "int_3", "opt_no")
    _equal(declined.status, InteractionStatus.DECLINED, "a declined card")
    _equal(await cards.decline(_A, "int_3", "opt_no"), declined, "declining it again")
    await _refused(Conflict, cards.dismiss(_A, "int_3"), "dismissing a declined card")
    await cards.insert(_card("int_4", case=_case("case-4")))
    dismissed = await cards.dismiss(_A, "int_4")
    _equal(await cards.dismiss(_A, "int_4"), dismissed, "dismissing it again")


@_check
async def check_interaction_payloads_are_immutable(stores: Stores) -> None:
    cards = stores.interactions
    card = _card("int_1")
    await cards.insert(card)
    _equal(await cards.insert(card), card, "inserting the same card again")
    changed = _card("int_1", title="Another title")
    await _refused(Conflict, cards.insert(changed), "another payload under a stored id")
    await _refused(
        Conflict,
        cards.insert_replacing_blocking(changed),
        "replacing a card with another payload under its own id",
    )
    await cards.begin_resolution(_A, "int_1", "opt_yes")
    await cards.finish(_A, "int_1", InteractionStatus.RESOLVED, "opt_yes", ("evt_1",))
    stored = await cards.get(_A, "int_1")
    _equal(
        stored.model_dump(exclude=_CARD_LIFECYCLE),
        card.model_dump(exclude=_CARD_LIFECYCLE),
        "everything but the lifecycle fields after resolution",
    )
    _equal(stored.payload_hash, card.payload.hash(), "the payload hash")
    _equal(await cards.insert(card), stored, "re-inserting a settled card (never reactivates it)")


@_check
async def check_revision_invalidation_spares_revision_independent_cards(stores: Stores) -> None:
    cards = stores.interactions
    at_one = _case("case-1", 1)
    await cards.insert(_card("int_a", case=at_one, created_at=_T0 + 1))
    await cards.insert(
        _card("int_b", case=at_one, blocking=False, revision_independent=True, created_at=_T0 + 2)
    )
    await cards.insert(_card("int_c", case=_case("case-1", 2), blocking=False, created_at=_T0 + 3))
    await cards.insert(_card("int_d", case=at_one, blocking=False, created_at=_T0 + 4))
    await cards.begin_resolution(_A, "int_d", "opt_yes")
    await cards.insert(_card("int_e", case=at_one, blocking=False, created_at=_T0))
    await cards.insert(_card("int_f", case=_case("case-2", 1)))
    invalidated = await cards.invalidate_for_revision(_A, at_one.key, 2)
    _equal(invalidated, ("int_e", "int_a"), "the stale cards, by (created_at, interaction_id)")
    expected = {
        "int_a": InteractionStatus.INVALIDATED,
        "int_b": InteractionStatus.ACTIVE,
        "int_c": InteractionStatus.ACTIVE,
        "int_d": InteractionStatus.RESOLVING,
        "int_e": InteractionStatus.INVALIDATED,
        "int_f": InteractionStatus.ACTIVE,
    }
    _equal(
        {card_id: await _status(stores, _A, card_id) for card_id in expected},
        expected,
        "statuses after the revision moved to 2",
    )
    _equal(await cards.invalidate_for_revision(_A, at_one.key, 2), (), "invalidating again")
    _equal(
        await cards.invalidate_case_cards(_A, at_one.key),
        ("int_b", "int_c"),
        "the administrative invalidation (revision-independent cards included)",
    )
    _equal(await _status(stores, _A, "int_d"), InteractionStatus.RESOLVING, "the resolving card")
    _equal(await _status(stores, _A, "int_f"), InteractionStatus.ACTIVE, "another case's card")


@_check
async def check_the_expiry_sweep_expires_only_due_active_cards(stores: Stores) -> None:
    cards = stores.interactions
    await cards.insert(_card("int_1", case=_case("case-1"), expires_at=_T0 + 10))
    await cards.insert(_card("int_2", case=_case("case-2"), expires_at=_T0 + 20))
    await cards.insert(_card("int_3", case=_case("case-3"), expires_at=_T0 + 15))
    await cards.begin_resolution(_A, "int_3", "opt_yes")
    await cards.insert(_card("int_4", case=_case("case-4")))
    await cards.insert(_card("int_5", case=_case("case-5"), expires_at=_T0 + 30))
    await cards.insert(_card("int_6", account=_B, expires_at=_T0 + 5))

    def listed(found: Sequence[Interaction]) -> list[tuple[str, str, InteractionStatus]]:
        return [(c.account_id, c.interaction_id, c.status) for c in found]

    expired = InteractionStatus.EXPIRED
    _equal(
        listed(await cards.expire_due(_T0 + 20, 2)),
        [(_B, "int_6", expired), (_A, "int_1", expired)],
        "the first sweep, by (expires_at, account_id, interaction_id)",
    )
    _equal(
        listed(await cards.expire_due(_T0 + 20, 2)),
        [(_A, "int_2", expired)],
        "the second sweep",
    )
    _equal(await cards.expire_due(_T0 + 20, 2), (), "a third sweep")
    _equal(
        [await _status(stores, _A, c) for c in ("int_3", "int_4", "int_5")],
        [InteractionStatus.RESOLVING, InteractionStatus.ACTIVE, InteractionStatus.ACTIVE],
        "a resolving card, a card without expiry and a card not yet due",
    )
    await cards.insert(_card("int_7", case=_case("case-1")))


# --- command journal ----------------------------------------------------------------------------


@_check
async def check_journal_admission_is_fresh_exactly_once_per_key_under_interleaving(
    stores: Stores,
) -> None:
    journal = stores.journal
    entry = _entry("cmd_1")
    admissions = await asyncio.gather(*(journal.begin(entry) for _ in range(8)))
    fresh = [a for a in admissions if isinstance(a, Fresh)]
    _equal(len(fresh), 1, "fresh admissions of one key among 8 concurrent callers")
    _equal(
        {(a.kind, a.entry.command_id) for a in admissions if not isinstance(a, Fresh)},
        {("replay", "cmd_1")},
        "what the other callers got",
    )
    others = [_entry(f"cmd_{n}", payload={"n": n}) for n in range(2, 7)]
    admitted = await asyncio.gather(*(journal.begin(e) for e in others))
    _equal([isinstance(a, Fresh) for a in admitted], [True] * len(others), "distinct keys at once")
    _equal(
        (await journal.get_by_key(_A, entry.idempotency_key)).command_id,
        "cmd_1",
        "the entry admitted under the key",
    )


@_check
async def check_a_settled_journal_entry_is_replayed_not_readmitted(stores: Stores) -> None:
    journal = stores.journal
    entry = _entry("cmd_1")
    _true(isinstance(await journal.begin(entry), Fresh), "the first admission is fresh")
    await journal.mark_executing(_A, "cmd_1")
    outcome = CommittedOutcome(new_revision=2, event_ids=("evt_1",))
    settled = await journal.complete(_A, "cmd_1", outcome)
    again = await journal.begin(entry)
    _true(isinstance(again, Replay), "admitting a settled command again replays it")
    _equal(again.entry, settled, "the replayed entry")
    _equal(await journal.unsettled_for_turn(_A, "turn_1"), (), "unsettled entries")
    waiting = _entry("cmd_2", payload={"n": 2}, status=JournalStatus.AWAITING_CONFIRMATION)
    _true(isinstance(await journal.begin(waiting), Fresh), "an entry awaiting confirmation")
    replayed = await journal.begin(waiting)
    _equal(
        (replayed.kind, replayed.entry.status),
        ("replay", JournalStatus.AWAITING_CONFIRMATION),
        "admitting it again",
    )


@_check
async def check_a_reused_idempotency_key_with_a_different_command_is_refused(
    stores: Stores,
) -> None:
    journal = stores.journal
    entry = _entry("cmd_1")
    await journal.begin(entry)
    variants = {
        "cmd_2": entry.model_copy(update={"command_id": "cmd_2", "payload": {"note": "other"}}),
        "cmd_3": entry.model_copy(update={"command_id": "cmd_3", "case_ref": _case("case-1", 7)}),
        "cmd_4": entry.model_copy(update={"command_id": "cmd_4", "command_type": "conformance.x"}),
    }
    for command_id, variant in variants.items():
        await _refused(Conflict, journal.begin(variant), "a stored key with another command")
        await _refused(NotFound, journal.get(_A, command_id), "the refused command")
    await _refused(
        Conflict,
        journal.begin(_entry("cmd_1", payload={"note": "another key"})),
        "a stored command id under another key",
    )
    _equal(await journal.get(_A, "cmd_1"), entry, "the stored entry")


@_check
async def check_journal_completion_is_compare_and_swap(stores: Stores) -> None:
    journal = stores.journal
    await journal.begin(_entry("cmd_1"))
    committed = CommittedOutcome(new_revision=2, event_ids=("evt_1",))
    done = await journal.complete(_A, "cmd_1", committed)
    _equal(
        (done.status, done.outcome, done.completed_at is not None),
        (JournalStatus.COMMITTED, committed, True),
        "the settled entry",
    )
    _equal(await journal.complete(_A, "cmd_1", committed), done, "the same outcome again")
    for what, outcome in (
        ("failing a committed command", FailedOutcome(code="conformance.failed")),
        ("another commit", CommittedOutcome(new_revision=3, event_ids=("evt_2",))),
        ("an unknown outcome after a commit", OutcomeUnknown(attempt_id="attempt-1")),
    ):
        await _refused(Conflict, journal.complete(_A, "cmd_1", outcome), what)
    await _refused(Conflict, journal.mark_executing(_A, "cmd_1"), "re-executing it")
    _equal(await journal.get(_A, "cmd_1"), done, "the entry after refused moves")

    await journal.begin(_entry("cmd_2", payload={"n": 2}))
    executing = await journal.mark_executing(_A, "cmd_2")
    _equal(await journal.mark_executing(_A, "cmd_2"), executing, "executing again")
    unknown = OutcomeUnknown(attempt_id="attempt-1")
    pending_check = await journal.complete(_A, "cmd_2", unknown)
    _equal(pending_check.status, JournalStatus.OUTCOME_UNKNOWN, "an unknown outcome")
    _equal(await journal.complete(_A, "cmd_2", unknown), pending_check, "the same unknown again")
    await _refused(
        Conflict,
        journal.complete(_A, "cmd_2", OutcomeUnknown(attempt_id="attempt-2")),
        "another unknown outcome",
    )
    rejected = await journal.complete(_A, "cmd_2", RejectedOutcome(code="conformance.refused"))
    _equal(rejected.status, JournalStatus.FAILED, "reconciling the unknown outcome")
    await _refused(Conflict, journal.complete(_A, "cmd_2", committed), "changing it afterwards")

    await journal.begin(_entry("cmd_3", payload={"n": 3}))
    await _refused(
        InvalidRecord,
        journal.complete(_A, "cmd_3", AwaitingConfirmationOutcome(interaction_id="int_1")),
        "an outcome that settles nothing",
    )
    _equal((await journal.get(_A, "cmd_3")).status, JournalStatus.PENDING, "the untouched entry")


# --- event ledger -------------------------------------------------------------------------------


@_check
async def check_events_append_in_order_and_read_back_by_id(stores: Stores) -> None:
    ledger = stores.events
    batch = [_event("evt_3"), _event("evt_1"), _event("evt_2")]
    appended = await ledger.append(_A, batch)
    _equal(_ids(appended, "event_id"), ["evt_3", "evt_1", "evt_2"], "the append order")
    sequences = [e.sequence or 0 for e in appended]
    _true(
        _increasing([0, *sequences]),
        f"sequences increase in append order: {sequences}",
    )
    _equal(
        [e.model_copy(update={"sequence": None}) for e in appended],
        batch,
        "appended events apart from their sequence",
    )
    (other,) = await ledger.append(_B, [_event("evt_9", account=_B)])
    (later,) = await ledger.append(_A, [_event("evt_4")])
    _true(
        sequences[-1] < (other.sequence or 0) < (later.sequence or 0),
        "sequences increase store-wide",
    )
    found = await ledger.get_by_ids(
        _A, ["evt_4", "evt_2", "evt_missing", "evt_9", "evt_3", "evt_2"]
    )
    _equal(_ids(found, "event_id"), ["evt_3", "evt_2", "evt_4"], "events read by id")
    _equal(found[0], appended[0], "an event read back")
    _equal(await ledger.append(_A, []), (), "appending nothing")


@_check
async def check_a_duplicate_event_id_appends_nothing(stores: Stores) -> None:
    ledger = stores.events
    await ledger.append(_A, [_event("evt_1")])
    before = await ledger.read_from(_A, EventCursor.START, 100)
    await _refused(
        Conflict, ledger.append(_A, [_event("evt_2"), _event("evt_1")]), "a stored event id"
    )
    await _refused(
        Conflict, ledger.append(_A, [_event("evt_3"), _event("evt_3")]), "an id twice in a batch"
    )
    await _refused(
        InvalidRecord,
        ledger.append(_A, [_event("evt_4"), _event("evt_5").model_copy(update={"sequence": 7})]),
        "an event that already has a sequence",
    )
    await _refused(
        InvalidRecord,
        ledger.append(_A, [_event("evt_6"), _event("evt_7", account=_B)]),
        "an event of another account",
    )
    _equal(
        await ledger.get_by_ids(_A, [f"evt_{n}" for n in range(2, 8)]),
        (),
        "events of the refused batches",
    )
    _equal(await ledger.read_from(_A, EventCursor.START, 100), before, "the stream")
    await ledger.append(_B, [_event("evt_1", account=_B)])


@_check
async def check_paging_by_sequence_skips_and_repeats_nothing_while_the_ledger_grows(
    stores: Stores,
) -> None:
    ledger = stores.events
    cursor = EventCursor.START
    appended: list[str] = []
    seen: list[str] = []

    async def read_page() -> int:
        nonlocal cursor
        page = await ledger.read_from(_A, cursor, 2)
        if not page.events:
            _equal(page.next_cursor, cursor, "the cursor after an empty page")
            return 0
        sequences = [e.sequence or 0 for e in page.events]
        _true(
            cursor.sequence < sequences[0] and _increasing(sequences),
            f"a page after sequence {cursor.sequence} is in sequence order: {sequences}",
        )
        _equal(page.next_cursor.sequence, sequences[-1], "the cursor after a page")
        seen.extend(e.event_id for e in page.events)
        cursor = page.next_cursor
        return len(page.events)

    number = 0
    for round_ in range(6):
        batch = []
        for _ in range(round_ % 3 + 1):
            number += 1
            batch.append(_event(f"evt_{number:03d}", case_id=f"case-{number % 2}"))
        await ledger.append(_A, batch)
        appended.extend(e.event_id for e in batch)
        await ledger.append(_B, [_event(f"evt_b{round_}", account=_B)])
        await read_page()
    for _ in range(100):
        if not await read_page():
            break
    _equal(seen, appended, "every event of the account, once, in commit order")


@_check
async def check_case_history_is_read_since_a_revision(stores: Stores) -> None:
    ledger = stores.events
    await ledger.append(
        _A,
        [
            _event("evt_1", revision=1),
            _event("evt_2", revision=2),
            _event("evt_3", case_id="case-2", revision=1),
        ],
    )
    await ledger.append(_A, [_event("evt_4", revision=2), _event("evt_5", revision=3)])
    await ledger.append(_B, [_event("evt_6", account=_B, revision=2)])
    key = _case("case-1").key
    _equal(
        _ids(await ledger.list_for_case(_A, key, 1, 10), "event_id"),
        ["evt_2", "evt_4", "evt_5"],
        "the case's events since revision 1, by sequence",
    )
    _equal(
        _ids(await ledger.list_for_case(_A, key, 1, 2), "event_id"),
        ["evt_2", "evt_4"],
        "the same capped at 2",
    )
    _equal(
        _ids(await ledger.list_for_case(_A, key, 0, 10), "event_id"),
        ["evt_1", "evt_2", "evt_4", "evt_5"],
        "the whole history",
    )
    _equal(await ledger.list_for_case(_A, key, 3, 10), (), "nothing after the last revision")


# --- outbox -------------------------------------------------------------------------------------


@_check
async def check_outbox_enqueue_refuses_duplicates_and_non_pending_rows(stores: Stores) -> None:
    outbox = stores.outbox
    row = _outbox_row("obx_1", key="key-1")
    _equal(await outbox.enqueue(row), row, "the enqueued row")
    _equal(await outbox.get("obx_1"), row, "the stored row")
    await _refused(Conflict, outbox.enqueue(row), "the same row again")
    await _refused(
        Conflict,
        outbox.enqueue(_outbox_row("obx_2", key="key-1")),
        "another row with a stored destination and key",
    )
    await _refused(NotFound, outbox.get("obx_2"), "the refused row")
    await outbox.enqueue(_outbox_row("obx_3", key="key-1", destination="conformance.elsewhere"))
    claimed = OutboxEntry(
        outbox_id="obx_4",
        command_id="cmd_1",
        destination=_DESTINATION,
        idempotency_key="key-4",
        status=OutboxStatus.DISPATCHING,
        created_at=_T0,
        claim_worker_id="worker-1",
        claim_taken_at=_T0,
    )
    await _refused(InvalidRecord, outbox.enqueue(claimed), "a row that is not pending")
    await _refused(NotFound, outbox.get("obx_4"), "the refused row")


@_check
async def check_an_outbox_row_is_claimed_by_one_worker_only(stores: Stores) -> None:
    outbox = stores.outbox
    for n in range(1, 6):
        await outbox.enqueue(_outbox_row(f"obx_{n}", created_at=_T0 + 5 - n))
    await outbox.enqueue(_outbox_row("obx_later", created_at=_T0 - 1, next_attempt_at=_T0 + 999))
    first = await outbox.claim_due(_T0 + 10, 2, "worker-0")
    _equal(_ids(first, "outbox_id"), ["obx_5", "obx_4"], "the oldest due rows")
    _equal(
        {(r.status, r.attempt_count, r.claim_worker_id, r.claim_taken_at) for r in first},
        {(OutboxStatus.DISPATCHING, 1, "worker-0", _T0 + 10)},
        "the claimed rows",
    )
    claims = await asyncio.gather(
        *(outbox.claim_due(_T0 + 10, 2, f"worker-{n}") for n in range(1, 5))
    )
    handed = [(r.outbox_id, r.claim_worker_id) for batch in claims for r in batch]
    _equal(
        sorted(outbox_id for outbox_id, _ in handed),
        ["obx_1", "obx_2", "obx_3"],
        "rows handed to 4 concurrent claimers (each once)",
    )
    for outbox_id, worker in handed:
        _equal((await outbox.get(outbox_id)).claim_worker_id, worker, "the stored claim of a row")
    _equal(await outbox.claim_due(_T0 + 10, 5, "worker-9"), (), "a claim with nothing due")


@_check
async def check_a_rescheduled_outbox_row_waits_until_it_is_due(stores: Stores) -> None:
    outbox = stores.outbox
    await outbox.enqueue(_outbox_row("obx_1"))
    await outbox.claim_due(_T0, 1, "worker-1")
    retry = await outbox.mark_failed("obx_1", "conformance.busy", retry_at=_T0 + 100)
    _equal(
        (retry.status, retry.next_attempt_at, retry.last_failure, retry.claim_worker_id),
        (OutboxStatus.PENDING, _T0 + 100, "conformance.busy", None),
        "a failure with a retry time",
    )
    _equal(await outbox.claim_due(_T0 + 99, 5, "worker-1"), (), "a claim before the retry time")
    (second,) = await outbox.claim_due(_T0 + 100, 5, "worker-2")
    _equal(second.attempt_count, 2, "the second attempt")
    unknown = await outbox.mark_outcome_unknown("obx_1", "remote-1")
    _equal(
        (unknown.status, unknown.remote_ref, unknown.claim_worker_id),
        (OutboxStatus.OUTCOME_UNKNOWN, "remote-1", None),
        "an unknown outcome",
    )
    _equal(await outbox.mark_outcome_unknown("obx_1"), unknown, "the unknown outcome again")
    await _refused(
        Conflict, outbox.mark_outcome_unknown("obx_1", "remote-2"), "another remote reference"
    )
    _equal(await outbox.claim_due(_T0 + 999, 5, "worker-1"), (), "claiming an unknown outcome")
    rescheduled = await outbox.reschedule("obx_1", _T0 + 300)
    _equal(
        (rescheduled.status, rescheduled.next_attempt_at),
        (OutboxStatus.PENDING, _T0 + 300),
        "the rescheduled row",
    )
    _equal(await outbox.claim_due(_T0 + 299, 5, "worker-1"), (), "a claim before it is due")
    (third,) = await outbox.claim_due(_T0 + 300, 5, "worker-3")
    _equal(third.attempt_count, 3, "the third attempt")
    done = await outbox.mark_completed("obx_1")
    _equal(
        (done.status, done.completed_at is not None, done.claim_worker_id),
        (OutboxStatus.COMPLETED, True, None),
        "the completed row",
    )
    _equal(await outbox.mark_completed("obx_1"), done, "completing it again")
    late_moves: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        ("failing a completed row", lambda: outbox.mark_failed("obx_1", "conformance.late")),
        ("rescheduling a completed row", lambda: outbox.reschedule("obx_1", _T0 + 400)),
        ("an unknown outcome after completion", lambda: outbox.mark_outcome_unknown("obx_1")),
    ]
    for what, action in late_moves:
        await _refused(Conflict, action(), what)

    await outbox.enqueue(_outbox_row("obx_2"))
    await outbox.claim_due(_T0 + 500, 1, "worker-1")
    failed = await outbox.mark_failed("obx_2", "conformance.refused")
    _equal(
        (failed.status, failed.completed_at is not None),
        (OutboxStatus.FAILED, True),
        "a final failure",
    )
    _equal(await outbox.mark_failed("obx_2", "conformance.refused"), failed, "the same again")
    await _refused(
        Conflict, outbox.mark_failed("obx_2", "conformance.other"), "another failure reason"
    )
    await _refused(NotFound, outbox.get("obx_missing"), "a row that does not exist")


@_check
async def check_the_reaper_releases_expired_claims(stores: Stores) -> None:
    outbox = stores.outbox
    for n in range(1, 4):
        await outbox.enqueue(_outbox_row(f"obx_{n}", created_at=_T0 + n))
    await outbox.claim_due(_T0 + 10, 1, "worker-1")
    await outbox.claim_due(_T0 + 50, 1, "worker-2")
    _equal(await outbox.release_expired_claims(_T0 + 50), 1, "claims taken before the limit")
    released = await outbox.get("obx_1")
    _equal(
        (released.status, released.claim_worker_id, released.next_attempt_at),
        (OutboxStatus.PENDING, None, None),
        "the released row (due now)",
    )
    held = await outbox.get("obx_2")
    _equal(
        (held.status, held.claim_worker_id),
        (OutboxStatus.DISPATCHING, "worker-2"),
        "a claim taken at the limit",
    )
    _equal(await outbox.release_expired_claims(_T0 + 50), 0, "reaping again")
    again = await outbox.claim_due(_T0 + 60, 5, "worker-3")
    _equal(
        [(r.outbox_id, r.attempt_count) for r in again],
        [("obx_1", 2), ("obx_3", 1)],
        "the next claim",
    )


# --- replay records -----------------------------------------------------------------------------


@_check
async def check_a_replay_record_is_upserted_until_its_phase_is_terminal(stores: Stores) -> None:
    replay = stores.replay
    first = _replay("turn_1")
    await replay.put(first)
    await replay.put(first)
    _equal(await replay.get(_A, "turn_1"), first, "the first record")
    committed = first.advanced(TurnPhase.COMMITTED, at=_T0 + 10, event_ids=("evt_1",))
    await replay.put(committed)
    _equal(await replay.get(_A, "turn_1"), committed, "the upserted record")
    _equal(await replay.get_by_token(_A, first.replay_token), committed, "the record by token")
    final = committed.advanced(TurnPhase.DELIVERED, at=_T0 + 20)
    await replay.put(final)
    await replay.put(final)
    await _refused(
        Conflict,
        replay.put(final.model_copy(update={"failure_code": "conformance.late"})),
        "changing a final record",
    )
    await _refused(Conflict, replay.put(committed), "moving a final record back")
    _equal(await replay.get(_A, "turn_1"), final, "the final record")
    forged = _replay("turn_2").model_copy(update={"replay_token": derive_replay_token("turn_3")})
    await _refused(InvalidRecord, replay.put(forged), "a token not derived from its turn")
    await _refused(NotFound, replay.get(_A, "turn_2"), "the refused record")


# --- ordering, scoping, codes -------------------------------------------------------------------


@_check
async def check_lists_follow_their_named_sort_keys(stores: Stores) -> None:
    arrival = [("c", _T0 + 5), ("a", _T0 + 9), ("b", _T0 + 5), ("d", _T0 + 1)]
    expected = ["d", "b", "c", "a"]

    await stores.conversations.ensure_conversation(_A, "conv_1")
    for name, at in arrival:
        await stores.conversations.append_user_turn(_user_turn(f"turn_{name}", received_at=at))
    _equal(
        _ids(await stores.conversations.list_turns(_A, "conv_1"), "turn_id"),
        [f"turn_{n}" for n in expected],
        "user turns by (received_at, turn_id)",
    )

    for name, at in arrival:
        await stores.interactions.insert(_card(f"int_{name}", blocking=False, created_at=at))
    await stores.interactions.insert(_card("int_closed", blocking=False, created_at=_T0))
    await stores.interactions.dismiss(_A, "int_closed")
    _equal(
        _ids(await stores.interactions.open_for_conversation(_A, "conv_1"), "interaction_id"),
        [f"int_{n}" for n in expected],
        "open cards by (created_at, interaction_id)",
    )
    _equal(
        _ids(await stores.interactions.for_case(_A, _case().key), "interaction_id"),
        ["int_closed"] + [f"int_{n}" for n in expected],
        "a case's cards by (created_at, interaction_id)",
    )

    for name, at in arrival:
        status = JournalStatus.AWAITING_CONFIRMATION if name == "a" else JournalStatus.PENDING
        await stores.journal.begin(_entry(f"cmd_{name}", created_at=at, status=status))
    await stores.journal.complete(_A, "cmd_b", FailedOutcome(code="conformance.failed"))
    await stores.journal.mark_executing(_A, "cmd_c")
    _equal(
        _ids(await stores.journal.for_turn(_A, "turn_1"), "command_id"),
        [f"cmd_{n}" for n in expected],
        "a turn's journal by (created_at, command_id)",
    )
    _equal(
        _ids(await stores.journal.unsettled_for_turn(_A, "turn_1"), "command_id"),
        ["cmd_d", "cmd_c"],
        "a turn's unsettled commands (pending, executing, outcome unknown)",
    )

    for name, at in arrival:
        await stores.outbox.enqueue(_outbox_row(f"obx_{name}", command="cmd_x", created_at=at))
    _equal(
        _ids(await stores.outbox.list_for_command("cmd_x"), "outbox_id"),
        [f"obx_{n}" for n in expected],
        "a command's outbox rows by (created_at, outbox_id)",
    )

    for name, at in arrival:
        await stores.replay.put(_replay(f"turn_{name}", recorded_at=at))
    late = _replay("turn_d", recorded_at=_T0 + 1).advanced(TurnPhase.COMMITTED, at=_T0 + 50)
    await stores.replay.put(late)
    _equal(
        _ids(await stores.replay.for_conversation(_A, "conv_1"), "turn_id"),
        [f"turn_{n}" for n in expected],
        "replay records by (first recorded_at, turn_id)",
    )
    last = await stores.replay.last_for_conversation(_A, "conv_1")
    _equal(
        last.turn_id if last else None,
        f"turn_{expected[-1]}",
        "the last replay record is the last in that order",
    )


@_check
async def check_another_accounts_records_are_not_found_exactly_like_missing_ones(
    stores: Stores,
) -> None:
    await _start_turn(stores, "turn_1")
    await stores.conversations.append_assistant_turn(_A, _assistant_turn("turn_1"))
    await stores.interactions.insert(_card("int_1"))
    entry = _entry("cmd_1")
    await stores.journal.begin(entry)
    await stores.events.append(_A, [_event("evt_1")])
    await stores.replay.put(_replay("turn_1"))
    conversations, cards, journal = stores.conversations, stores.interactions, stores.journal
    failed = FailedOutcome(code="conformance.failed")
    probes: list[tuple[str, Callable[[str, str], Awaitable[object]], str, str]] = [
        ("get_conversation", conversations.get_conversation, "conv_1", "conv_missing"),
        ("get_user_turn", conversations.get_user_turn, "turn_1", "turn_missing"),
        ("get_assistant_turn", conversations.get_assistant_turn, "turn_1", "turn_missing"),
        ("get_phase", conversations.get_phase, "turn_1", "turn_missing"),
        (
            "set_phase",
            lambda a, t: conversations.set_phase(a, t, TurnPhase.FAILED),
            "turn_1",
            "turn_missing",
        ),
        ("interactions.get", cards.get, "int_1", "int_missing"),
        (
            "begin_resolution",
            lambda a, i: cards.begin_resolution(a, i, "opt_yes"),
            "int_1",
            "int_missing",
        ),
        (
            "finish",
            lambda a, i: cards.finish(a, i, InteractionStatus.FAILED),
            "int_1",
            "int_missing",
        ),
        ("decline", cards.decline, "int_1", "int_missing"),
        ("dismiss", cards.dismiss, "int_1", "int_missing"),
        ("journal.get", journal.get, "cmd_1", "cmd_missing"),
        ("get_by_key", journal.get_by_key, entry.idempotency_key, "sha256:" + "0" * 64),
        ("mark_executing", journal.mark_executing, "cmd_1", "cmd_missing"),
        ("complete", lambda a, c: journal.complete(a, c, failed), "cmd_1", "cmd_missing"),
        ("replay.get", stores.replay.get, "turn_1", "turn_missing"),
        (
            "get_by_token",
            stores.replay.get_by_token,
            derive_replay_token("turn_1"),
            derive_replay_token("turn_missing"),
        ),
    ]
    for name, probe, theirs, missing in probes:
        foreign = await _refused(NotFound, probe(_B, theirs), f"{name} of another account's record")
        absent = await _refused(NotFound, probe(_B, missing), f"{name} of a missing record")
        _equal(
            (type(foreign), foreign.code, str(foreign)),
            (type(absent), absent.code, str(absent)),
            f"{name}: another account's record against a missing one",
        )
        _true(theirs not in str(foreign), f"{name}: the error names the id")
    await _refused(
        NotFound,
        conversations.append_user_turn(_user_turn("turn_9", account=_B)),
        "a user turn in another account's conversation",
    )
    await _refused(
        NotFound,
        conversations.append_assistant_turn(_B, _assistant_turn("turn_1", account=_B)),
        "an assistant turn for another account's user turn",
    )
    key = _case().key
    empty_lists: list[tuple[str, Callable[[], Awaitable[Sequence[object]]]]] = [
        ("list_turns", lambda: conversations.list_turns(_B, "conv_1")),
        ("open_for_conversation", lambda: cards.open_for_conversation(_B, "conv_1")),
        ("for_case", lambda: cards.for_case(_B, key)),
        ("for_turn", lambda: journal.for_turn(_B, "turn_1")),
        ("unsettled_for_turn", lambda: journal.unsettled_for_turn(_B, "turn_1")),
        ("get_by_ids", lambda: stores.events.get_by_ids(_B, ["evt_1"])),
        ("list_for_case", lambda: stores.events.list_for_case(_B, key, 0, 10)),
        ("for_conversation", lambda: stores.replay.for_conversation(_B, "conv_1")),
        ("invalidate_for_revision", lambda: cards.invalidate_for_revision(_B, key, 9)),
        ("invalidate_case_cards", lambda: cards.invalidate_case_cards(_B, key)),
    ]
    for name, listing in empty_lists:
        _equal(tuple(await listing()), (), f"{name} for another account")
    page = await stores.events.read_from(_B, EventCursor.START, 10)
    _equal(page.events, (), "read_from for another account")
    _equal(
        await stores.replay.last_for_conversation(_B, "conv_1"),
        None,
        "last_for_conversation for another account",
    )
    _equal(await _status(stores, _A, "int_1"), InteractionStatus.ACTIVE, "the owner's card")
    _equal((await journal.get(_A, "cmd_1")).status, JournalStatus.PENDING, "the owner's command")
    _equal(
        (await conversations.get_phase(_A, "turn_1")).phase,
        TurnPhase.RECEIVED,
        "the owner's phase marker",
    )


@_check
async def check_store_errors_carry_their_stable_codes(stores: Stores) -> None:
    missing = await _refused(
        NotFound, stores.conversations.get_conversation(_A, "conv_missing"), "a missing record"
    )
    await _start_turn(stores, "turn_1")
    conflict = await _refused(
        Conflict, stores.conversations.append_user_turn(_user_turn("turn_1")), "a repeated turn"
    )
    invalid = await _refused(
        InvalidRecord,
        stores.events.append(_A, [_event("evt_1", account=_B)]),
        "an event of another account",
    )
    for error, code in (
        (missing, codes.STORE_NOT_FOUND),
        (conflict, codes.STORE_CONFLICT),
        (invalid, codes.STORE_INVALID_RECORD),
    ):
        _equal(error.code, code, f"the code of {type(error).__name__}")
        _true(isinstance(error, TurnframeError), "a store error is a TurnframeError")
        _true(error.code in codes.ALL_CODES, f"{error.code} is a registered code")
    _true("conv_missing" not in str(missing), "a NotFound message never names the id")


# --- commit bundle ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _BundleWorld:
    account: str
    bundle: CommitBundle
    replay_before: ReplayRecord
    phase_before: TurnPhase


async def _bundle_world(
    stores: Stores, account: str, tag: str, *, final_replay: bool = False, final_phase: bool = False
) -> _BundleWorld:
    """A turn ready to commit: a command executing, a card resolving, a stale card, and the
    records a spoiled item can collide with (a settled command, an event, an idle card, a row)."""
    await _start_turn(stores, "turn_1", account=account)
    await _start_turn(stores, "turn_2", account=account)
    journal, cards = stores.journal, stores.interactions
    await journal.begin(_entry("cmd_0", account=account, turn="turn_1"))
    await journal.complete(account, "cmd_0", CommittedOutcome(new_revision=1, event_ids=()))
    await journal.begin(_entry("cmd_1", account=account, turn="turn_2"))
    await journal.mark_executing(account, "cmd_1")
    await stores.events.append(account, [_event("evt_0", account=account)])
    await cards.insert(_card("int_stale", account=account, case=_case("case-1", 1)))
    await cards.insert(_card("int_answered", account=account, case=_case("case-2", 1)))
    await cards.begin_resolution(account, "int_answered", "opt_yes")
    await cards.insert(_card("int_idle", account=account, case=_case("case-3", 1)))
    await stores.outbox.enqueue(_outbox_row(f"obx_{tag}_0", key=f"key-{tag}-0"))
    replay_before = _replay("turn_2", account=account)
    if final_replay:
        replay_before = replay_before.advanced(TurnPhase.FAILED, at=_T0 + 1)
    await stores.replay.put(replay_before)
    phase_before = TurnPhase.FAILED if final_phase else TurnPhase.RECEIVED
    await stores.conversations.set_phase(account, "turn_2", phase_before)
    new_revision = 2
    bundle = CommitBundle(
        account_id=account,
        conversation_id="conv_1",
        turn_id="turn_2",
        journal_completions=(
            JournalCompletion(
                command_id="cmd_1",
                outcome=CommittedOutcome(new_revision=new_revision, event_ids=("evt_1", "evt_2")),
            ),
        ),
        events=(
            _event("evt_1", account=account, revision=new_revision),
            _event("evt_2", account=account, revision=new_revision),
        ),
        interaction_finishes=(
            InteractionFinish(
                interaction_id="int_answered",
                status=InteractionStatus.RESOLVED,
                option_id="opt_yes",
                event_ids=("evt_1",),
            ),
        ),
        invalidations=(
            CaseInvalidation(workflow=_WORKFLOW, case_id="case-1", current_revision=new_revision),
        ),
        # Each new blocking card fits only because the stages before it freed its case's slot.
        interaction_inserts=(
            _card("int_next_1", account=account, case=_case("case-1", 2), turn="turn_2"),
            _card("int_next_2", account=account, case=_case("case-2", 2), turn="turn_2"),
        ),
        outbox=(_outbox_row(f"obx_{tag}_1", key=f"key-{tag}-1"),),
        replay=_replay("turn_2", account=account).advanced(
            TurnPhase.COMMITTED, at=_T0 + 2, event_ids=("evt_1", "evt_2")
        ),
        phase=TurnPhase.COMMITTED,
    )
    return _BundleWorld(account, bundle, replay_before, phase_before)


@_check
async def check_a_commit_bundle_applies_its_items_in_the_normative_order(stores: Stores) -> None:
    world = await _bundle_world(stores, _A, "a")
    bundle = world.bundle
    result = await stores.commits.commit(bundle)
    _equal(_ids(result.events, "event_id"), ["evt_1", "evt_2"], "the committed events")
    sequences = [e.sequence or 0 for e in result.events]
    _true(0 < sequences[0] < sequences[1], f"sequences assigned in order: {sequences}")
    _equal(result.invalidated, ("int_stale",), "the invalidated cards")
    entry = await stores.journal.get(_A, "cmd_1")
    _equal(
        (entry.status, entry.outcome),
        (JournalStatus.COMMITTED, bundle.journal_completions[0].outcome),
        "the completed command",
    )
    _equal(await stores.events.get_by_ids(_A, ["evt_1", "evt_2"]), result.events, "the ledger")
    answered = await stores.interactions.get(_A, "int_answered")
    _equal(
        (answered.status, answered.resolution_event_ids),
        (InteractionStatus.RESOLVED, ("evt_1",)),
        "the answered card",
    )
    statuses = {
        card_id: await _status(stores, _A, card_id)
        for card_id in ("int_stale", "int_next_1", "int_next_2", "int_idle")
    }
    _equal(
        statuses,
        {
            "int_stale": InteractionStatus.INVALIDATED,
            "int_next_1": InteractionStatus.ACTIVE,
            "int_next_2": InteractionStatus.ACTIVE,
            "int_idle": InteractionStatus.ACTIVE,
        },
        "the cards",
    )
    _equal(await stores.outbox.get("obx_a_1"), bundle.outbox[0], "the outbox row")
    _equal(await stores.replay.get(_A, "turn_2"), bundle.replay, "the replay record")
    _equal(
        (await stores.conversations.get_phase(_A, "turn_2")).phase,
        TurnPhase.COMMITTED,
        "the phase marker",
    )


_SPOILS: Final[tuple[tuple[str, type[StoreError]], ...]] = (
    ("a completion that settles a command differently (stage 1)", Conflict),
    ("a completion of an unknown command (stage 1)", NotFound),
    ("an event id already in the ledger (stage 2)", Conflict),
    ("a finish of a card nobody is resolving (stage 3)", Conflict),
    ("a second blocking card for a case (stage 5)", Conflict),
    ("an outbox row already enqueued (stage 6)", Conflict),
    ("a replay record that changes a final one (stage 7)", Conflict),
    ("a phase that leaves a final phase (stage 8)", Conflict),
    ("an event of another account (validation)", InvalidRecord),
)


def _spoiled(world: _BundleWorld, spoil: str, tag: str) -> CommitBundle:
    bundle, account = world.bundle, world.account
    if "settles a command differently" in spoil:
        extra = JournalCompletion(command_id="cmd_0", outcome=FailedOutcome(code="conformance.x"))
        return bundle.model_copy(
            update={"journal_completions": (*bundle.journal_completions, extra)}
        )
    if "unknown command" in spoil:
        extra = JournalCompletion(command_id="cmd_missing", outcome=FailedOutcome(code="x.y"))
        return bundle.model_copy(
            update={"journal_completions": (*bundle.journal_completions, extra)}
        )
    if "already in the ledger" in spoil:
        duplicate = _event("evt_0", account=account)
        return bundle.model_copy(update={"events": (*bundle.events, duplicate)})
    if "nobody is resolving" in spoil:
        finish = InteractionFinish(
            interaction_id="int_idle", status=InteractionStatus.RESOLVED, option_id="opt_yes"
        )
        return bundle.model_copy(
            update={"interaction_finishes": (*bundle.interaction_finishes, finish)}
        )
    if "second blocking card" in spoil:
        extra_card = _card("int_extra", account=account, case=_case("case-3", 1), turn="turn_2")
        return bundle.model_copy(
            update={"interaction_inserts": (*bundle.interaction_inserts, extra_card)}
        )
    if "outbox row already enqueued" in spoil:
        duplicate_row = _outbox_row(f"obx_{tag}_9", key=f"key-{tag}-0")
        return bundle.model_copy(update={"outbox": (*bundle.outbox, duplicate_row)})
    if "another account" in spoil:
        foreign = _event("evt_9", account=_B)
        return bundle.model_copy(update={"events": (*bundle.events, foreign)})
    return bundle  # the replay and phase spoils live in the world: its record/phase is final


@_check
async def check_a_commit_bundle_with_an_invalid_item_writes_nothing(stores: Stores) -> None:
    for number, (spoil, error) in enumerate(_SPOILS):
        account, tag = f"acct_spoil_{number}", f"s{number}"
        world = await _bundle_world(
            stores,
            account,
            tag,
            final_replay="replay record" in spoil,
            final_phase="final phase" in spoil,
        )
        await _refused(error, stores.commits.commit(_spoiled(world, spoil, tag)), spoil)
        after = f"after a bundle with {spoil}"
        entry = await stores.journal.get(account, "cmd_1")
        _equal(
            (entry.status, entry.outcome),
            (JournalStatus.EXECUTING, None),
            f"the executing command {after}",
        )
        settled = await stores.journal.get(account, "cmd_0")
        _equal(settled.outcome, CommittedOutcome(new_revision=1, event_ids=()), f"cmd_0 {after}")
        page = await stores.events.read_from(account, EventCursor.START, 100)
        _equal(_ids(page.events, "event_id"), ["evt_0"], f"the ledger {after}")
        statuses = {
            card_id: await _status(stores, account, card_id)
            for card_id in ("int_stale", "int_answered", "int_idle")
        }
        _equal(
            statuses,
            {
                "int_stale": InteractionStatus.ACTIVE,
                "int_answered": InteractionStatus.RESOLVING,
                "int_idle": InteractionStatus.ACTIVE,
            },
            f"the cards {after}",
        )
        for card_id in ("int_next_1", "int_next_2", "int_extra"):
            await _refused(
                NotFound, stores.interactions.get(account, card_id), f"{card_id} {after}"
            )
        await _refused(NotFound, stores.outbox.get(f"obx_{tag}_1"), f"the new row {after}")
        _equal(
            await stores.replay.get(account, "turn_2"),
            world.replay_before,
            f"the replay record {after}",
        )
        _equal(
            (await stores.conversations.get_phase(account, "turn_2")).phase,
            world.phase_before,
            f"the phase {after}",
        )


@_check
async def check_each_bundle_item_is_judged_on_the_state_its_own_stage_left(stores: Stores) -> None:
    """A repeated finish is accepted on the card as it stood at the finish stage, even when a
    later stage of the same bundle (an invalidation) moves that card."""
    await _start_turn(stores, "turn_1")
    await stores.interactions.insert(_card("int_1", case=_case("case-1", 1)))
    bundle = CommitBundle(
        account_id=_A,
        conversation_id="conv_1",
        turn_id="turn_1",
        interaction_finishes=(
            InteractionFinish(interaction_id="int_1", status=InteractionStatus.ACTIVE),
        ),
        invalidations=(CaseInvalidation(workflow=_WORKFLOW, case_id="case-1", current_revision=4),),
    )
    result = await stores.commits.commit(bundle)
    _equal(result.invalidated, ("int_1",), "the cards the later invalidation stage moved")
    _equal(await _status(stores, _A, "int_1"), InteractionStatus.INVALIDATED, "the card")


CHECKS: Final[tuple[str, ...]] = tuple(_REGISTRY)
