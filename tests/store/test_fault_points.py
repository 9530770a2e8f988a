"""Fault points: each fires once, in arming order, and leaves exactly what its name says
(inside a commit bundle: nothing of the bundle)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from turnframe_core.blocks import AnswerBlock
from turnframe_core.cases import CaseRef
from turnframe_core.commands import CommandEnvelope, InternalPolicy
from turnframe_core.derive import derive_block_id
from turnframe_core.events import DomainEvent
from turnframe_core.interactions import (
    Interaction,
    InteractionKind,
    InteractionOption,
    InteractionPayload,
    InteractionStatus,
    ResolveClarification,
)
from turnframe_core.replay import CommittedOutcome, TurnPhase
from turnframe_core.turn import AssistantTurn, TurnInput, TurnStatus
from turnframe_store import (
    CommitBundle,
    FaultPoint,
    Fresh,
    JournalCompletion,
    JournalEntry,
    JournalStatus,
    ManualClock,
    MemoryStores,
    NotFound,
    OutboxEntry,
    OutboxStatus,
    Replay,
    Timeout,
    Unavailable,
    UserTurnRecord,
)

A = "acct_a"
T0 = 1_700_000_000_000
DESIGN = Path(__file__).resolve().parents[2] / ".." / "shared" / "DESIGN.md"
#: DESIGN §12's fault points that are not store boundaries (the runtime and test kit own them).
NOT_STORE_BOUNDARIES = {"after_remote_request", "during_streaming"}
#: DESIGN §12's list, used only when the design file is not beside the repository.
DESIGN_POINTS_FALLBACK = {
    "after_interaction_persistence",
    "before_journal_insert",
    "after_journal_insert_before_commit",
    "after_commit_before_event_readback",
    "before_outbox_dispatch",
    "after_outbox_dispatch",
    "before_response_persistence",
    "after_remote_request",
    "during_streaming",
}


# --- builders -----------------------------------------------------------------------------------


def card(interaction_id: str, *, case_id: str = "case-1", turn: str = "turn_1") -> Interaction:
    options = tuple(
        InteractionOption(
            option_id=f"opt_{key}", label=key, action=ResolveClarification(answer_key=key)
        )
        for key in ("yes", "no")
    )
    return Interaction.create(
        interaction_id=interaction_id,
        account_id=A,
        conversation_id="conv_1",
        case_ref=CaseRef(workflow="sample.case", case_id=case_id, expected_revision=1),
        kind=InteractionKind.SINGLE_SELECT,
        payload=InteractionPayload(title="Pick one", options=options),
        created_by_turn=turn,
        created_at=T0,
    )


def entry(command_id: str = "cmd_1") -> JournalEntry:
    envelope = CommandEnvelope.build(
        command_id=command_id,
        turn_id="turn_1",
        account_id=A,
        case_ref=CaseRef(workflow="sample.case", case_id="case-1", expected_revision=1),
        origin=InternalPolicy(policy_key="test"),
        command_type="sample.note",
        payload={"command": command_id},
    )
    return JournalEntry.from_envelope(envelope, now=T0)


def event(event_id: str) -> DomainEvent:
    return DomainEvent(
        event_id=event_id,
        account_id=A,
        workflow="sample.case",
        case_id="case-1",
        case_revision=2,
        command_id="cmd_1",
        event_type="sample.noted",
        occurred_at=T0,
    )


def row(outbox_id: str = "obx_1") -> OutboxEntry:
    return OutboxEntry(
        outbox_id=outbox_id,
        command_id="cmd_1",
        destination="sample.remote",
        idempotency_key=f"key-{outbox_id}",
        created_at=T0,
    )


def assistant_turn() -> AssistantTurn:
    started = AssistantTurn.begin(
        turn_id="turn_1", conversation_id="conv_1", account_id=A, locale="en", created_at=T0
    )
    answer = AnswerBlock(block_id=derive_block_id("acct_1", "turn_1", "answer:q1"), text="Done.")
    return started.finish(TurnStatus.COMPLETED, at=T0 + 1, blocks=(answer,))


@pytest.fixture
def stores() -> MemoryStores:
    return MemoryStores(clock=ManualClock(T0))


async def start_turn(stores: MemoryStores) -> None:
    await stores.conversations.ensure_conversation(A, "conv_1")
    await stores.conversations.append_user_turn(
        UserTurnRecord(
            account_id=A,
            conversation_id="conv_1",
            turn_id="turn_1",
            received_at=T0,
            input=TurnInput(account_id=A, conversation_id="conv_1", text="hi"),
        )
    )


async def ready_bundle(stores: MemoryStores) -> CommitBundle:
    """A turn with one executing command, and the bundle that commits it."""
    await start_turn(stores)
    await stores.journal.begin(entry())
    await stores.journal.mark_executing(A, "cmd_1")
    return CommitBundle(
        account_id=A,
        conversation_id="conv_1",
        turn_id="turn_1",
        journal_completions=(
            JournalCompletion(
                command_id="cmd_1",
                outcome=CommittedOutcome(new_revision=2, event_ids=("evt_1",)),
            ),
        ),
        events=(event("evt_1"),),
        interaction_inserts=(card("int_1"),),
        outbox=(row(),),
        phase=TurnPhase.COMMITTED,
    )


async def bundle_landed(stores: MemoryStores) -> bool:
    """True when every item of `ready_bundle` is stored; False when none is (else it fails)."""
    found = [
        (await stores.journal.get(A, "cmd_1")).status is JournalStatus.COMMITTED,
        bool(await stores.events.get_by_ids(A, ["evt_1"])),
        bool(await stores.interactions.open_for_conversation(A, "conv_1")),
        bool(await stores.outbox.list_for_command("cmd_1")),
        (await stores.conversations.get_phase(A, "turn_1")).phase is TurnPhase.COMMITTED,
    ]
    assert len(set(found)) == 1, f"a bundle was applied in part: {found}"
    return found[0]


# --- arming -------------------------------------------------------------------------------------


async def test_an_armed_fault_fires_once_and_is_consumed(stores: MemoryStores) -> None:
    stores.faults.arm(FaultPoint.BEFORE_JOURNAL_INSERT)

    with pytest.raises(Unavailable):
        await stores.journal.begin(entry())
    admission = await stores.journal.begin(entry())

    assert isinstance(admission, Fresh)
    assert stores.faults.armed() == ()
    assert [f.point for f in stores.faults.fired] == [FaultPoint.BEFORE_JOURNAL_INSERT]


async def test_faults_armed_at_one_point_fire_in_arming_order(stores: MemoryStores) -> None:
    first, second = Unavailable("first"), Timeout("second")
    stores.faults.arm(FaultPoint.BEFORE_OUTBOX_DISPATCH, error=first)
    stores.faults.arm(FaultPoint.BEFORE_OUTBOX_DISPATCH, error=second)

    raised = []
    for _ in range(2):
        with pytest.raises((Unavailable, Timeout)) as caught:
            await stores.outbox.claim_due(T0, 1, "worker-1")
        raised.append(caught.value)

    assert raised == [first, second]
    assert await stores.outbox.claim_due(T0, 1, "worker-1") == ()


async def test_a_fault_at_one_point_does_not_fire_at_another(stores: MemoryStores) -> None:
    stores.faults.arm(FaultPoint.BEFORE_RESPONSE_PERSISTENCE)

    await start_turn(stores)
    await stores.journal.begin(entry())

    assert stores.faults.armed() == (FaultPoint.BEFORE_RESPONSE_PERSISTENCE,)


async def test_a_fault_can_let_crossings_through_before_it_fires(stores: MemoryStores) -> None:
    stores.faults.arm(FaultPoint.BEFORE_JOURNAL_INSERT, skip=2)

    await stores.journal.begin(entry("cmd_1"))
    await stores.journal.begin(entry("cmd_2"))
    with pytest.raises(Unavailable):
        await stores.journal.begin(entry("cmd_3"))

    with pytest.raises(NotFound):
        await stores.journal.get(A, "cmd_3")


def test_a_default_fault_says_whether_the_write_may_have_landed() -> None:
    for point in FaultPoint:
        expected = Timeout if point.value.startswith("after_") else Unavailable

        assert type(point.default_error()) is expected, point
        assert point.leaves_write_visible is (expected is Timeout), point


def test_a_disarmed_plan_fires_nothing(stores: MemoryStores) -> None:
    stores.faults.arm(FaultPoint.BEFORE_JOURNAL_INSERT)

    stores.faults.clear()

    assert stores.faults.armed() == ()


# --- each point, outside a bundle ---------------------------------------------------------------


async def _before_journal_insert(stores: MemoryStores) -> None:
    with pytest.raises(Unavailable):
        await stores.journal.begin(entry())
    with pytest.raises(NotFound):
        await stores.journal.get_by_key(A, entry().idempotency_key)
    assert isinstance(await stores.journal.begin(entry()), Fresh)


async def _after_journal_insert_before_commit(stores: MemoryStores) -> None:
    with pytest.raises(Timeout):
        await stores.journal.begin(entry())
    assert (await stores.journal.get(A, "cmd_1")).status is JournalStatus.PENDING
    assert isinstance(await stores.journal.begin(entry()), Replay)


async def _after_commit_before_event_readback(stores: MemoryStores) -> None:
    with pytest.raises(Timeout):
        await stores.events.append(A, [event("evt_1"), event("evt_2")])
    stored = await stores.events.get_by_ids(A, ["evt_1", "evt_2"])
    assert [e.event_id for e in stored] == ["evt_1", "evt_2"]


async def _after_interaction_persistence(stores: MemoryStores) -> None:
    with pytest.raises(Timeout):
        await stores.interactions.insert(card("int_1"))
    assert (await stores.interactions.get(A, "int_1")).status is InteractionStatus.ACTIVE


async def _before_outbox_dispatch(stores: MemoryStores) -> None:
    await stores.outbox.enqueue(row())
    with pytest.raises(Unavailable):
        await stores.outbox.claim_due(T0, 5, "worker-1")
    assert await stores.outbox.get("obx_1") == row()


async def _after_outbox_dispatch(stores: MemoryStores) -> None:
    await stores.outbox.enqueue(row())
    (claimed,) = await stores.outbox.claim_due(T0, 5, "worker-1")
    with pytest.raises(Timeout):
        await stores.outbox.mark_completed("obx_1")
    assert await stores.outbox.get("obx_1") == claimed


async def _before_response_persistence(stores: MemoryStores) -> None:
    await start_turn(stores)
    with pytest.raises(Unavailable):
        await stores.conversations.append_assistant_turn(A, assistant_turn())
    with pytest.raises(NotFound):
        await stores.conversations.get_assistant_turn(A, "turn_1")


SCENARIOS: dict[FaultPoint, Callable[[MemoryStores], Awaitable[None]]] = {
    FaultPoint.BEFORE_JOURNAL_INSERT: _before_journal_insert,
    FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT: _after_journal_insert_before_commit,
    FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK: _after_commit_before_event_readback,
    FaultPoint.AFTER_INTERACTION_PERSISTENCE: _after_interaction_persistence,
    FaultPoint.BEFORE_OUTBOX_DISPATCH: _before_outbox_dispatch,
    FaultPoint.AFTER_OUTBOX_DISPATCH: _after_outbox_dispatch,
    FaultPoint.BEFORE_RESPONSE_PERSISTENCE: _before_response_persistence,
}


@pytest.mark.parametrize("point", list(FaultPoint), ids=str)
async def test_every_fault_point_leaves_exactly_what_its_name_says(
    stores: MemoryStores, point: FaultPoint
) -> None:
    stores.faults.arm(point)

    await SCENARIOS[point](stores)

    assert [fired.point for fired in stores.faults.fired] == [point]


@pytest.mark.parametrize("settle", ["mark_completed", "mark_failed", "mark_outcome_unknown"])
async def test_after_outbox_dispatch_keeps_the_row_dispatching_whatever_the_result(
    stores: MemoryStores, settle: str
) -> None:
    await stores.outbox.enqueue(row())
    (claimed,) = await stores.outbox.claim_due(T0, 5, "worker-1")
    stores.faults.arm(FaultPoint.AFTER_OUTBOX_DISPATCH)

    method = getattr(stores.outbox, settle)
    with pytest.raises(Timeout):
        await (method("obx_1", "sample.refused") if settle == "mark_failed" else method("obx_1"))

    stored = await stores.outbox.get("obx_1")
    assert stored == claimed
    assert (stored.status, stored.claim_worker_id) == (OutboxStatus.DISPATCHING, "worker-1")


async def test_after_interaction_persistence_leaves_a_replacement_visible(
    stores: MemoryStores,
) -> None:
    await stores.interactions.insert(card("int_old"))
    stores.faults.arm(FaultPoint.AFTER_INTERACTION_PERSISTENCE)

    with pytest.raises(Timeout):
        await stores.interactions.insert_replacing_blocking(card("int_new"))

    assert (await stores.interactions.get(A, "int_old")).status is InteractionStatus.INVALIDATED
    assert (await stores.interactions.get(A, "int_new")).status is InteractionStatus.ACTIVE


# --- inside a commit bundle ---------------------------------------------------------------------

BUNDLE_POINTS = [
    FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT,
    FaultPoint.AFTER_INTERACTION_PERSISTENCE,
]


@pytest.mark.parametrize("point", BUNDLE_POINTS, ids=str)
async def test_a_fault_inside_a_bundle_leaves_nothing_of_it(
    stores: MemoryStores, point: FaultPoint
) -> None:
    bundle = await ready_bundle(stores)
    stores.faults.arm(point)

    with pytest.raises(Timeout):
        await stores.commits.commit(bundle)

    assert await bundle_landed(stores) is False
    assert (await stores.journal.get(A, "cmd_1")).status is JournalStatus.EXECUTING
    assert [fired.point for fired in stores.faults.fired] == [point]


async def test_a_bundle_aborted_by_a_fault_can_be_committed_afterwards(
    stores: MemoryStores,
) -> None:
    bundle = await ready_bundle(stores)
    stores.faults.arm(FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT)
    with pytest.raises(Timeout):
        await stores.commits.commit(bundle)

    result = await stores.commits.commit(bundle)

    assert [e.event_id for e in result.events] == ["evt_1"]
    assert await bundle_landed(stores) is True


async def test_the_read_back_point_lets_a_bundle_land_and_then_fails_the_call(
    stores: MemoryStores,
) -> None:
    bundle = await ready_bundle(stores)
    stores.faults.arm(FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK)

    with pytest.raises(Timeout):
        await stores.commits.commit(bundle)

    assert await bundle_landed(stores) is True  # the commit landed; its caller never heard
    assert [fired.point for fired in stores.faults.fired] == [
        FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK
    ]


async def test_the_read_back_point_fails_a_transaction_after_its_commit(
    stores: MemoryStores,
) -> None:
    bundle = await ready_bundle(stores)
    stores.faults.arm(FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK)
    reached_the_end = False

    with pytest.raises(Timeout):
        async with stores.transaction() as tx:
            await tx.commits.commit(bundle)  # inside: nothing fails yet
            reached_the_end = True

    assert reached_the_end
    assert await bundle_landed(stores) is True


@pytest.mark.parametrize(
    ("point", "emptied"),
    [
        (FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT, "journal_completions"),
        (FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK, "events"),
        (FaultPoint.AFTER_INTERACTION_PERSISTENCE, "interaction_inserts"),
    ],
    ids=str,
)
async def test_a_bundle_point_waits_for_a_bundle_whose_stage_writes_something(
    stores: MemoryStores, point: FaultPoint, emptied: str
) -> None:
    bundle = await ready_bundle(stores)
    stores.faults.arm(point)

    await stores.commits.commit(bundle.model_copy(update={emptied: ()}))

    assert stores.faults.armed() == (point,)


# --- the design's list --------------------------------------------------------------------------


def design_fault_points() -> set[str]:
    if not DESIGN.is_file():
        return DESIGN_POINTS_FALLBACK
    text = DESIGN.read_text(encoding="utf-8")
    section = text.split("## 12.", 1)[1].split("\n## ", 1)[0]
    listed = re.search(r"named fault points \(([^)]*)\)", section, flags=re.DOTALL)
    assert listed is not None, "DESIGN §12 no longer lists its fault points in parentheses"
    return {name.strip() for name in listed.group(1).split(",")}


def test_every_store_boundary_of_the_design_has_a_fault_point() -> None:
    store_boundaries = design_fault_points() - NOT_STORE_BOUNDARIES

    assert {point.value for point in FaultPoint} == store_boundaries
