"""The outbox's rules on every backend, with the relay and the actors' bodies called directly
(the tests with real dramatiq workers and processes are in test_workers.py): the airline is
reached only through the outbox; a redelivery does nothing; retryable failures back off and
the last one is final; silence becomes an unknown outcome, a notice, then reconciliation and
the follow-up receipt; an attempt after a dead worker asks before it sends; a crash after the
answer is recorded is finished by recovery."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import pytest

from turnframe_core import (
    DirectSafeUserAct,
    ExternalCallback,
    TurnPhase,
    codes,
    origin_satisfies,
)
from turnframe_runtime import (
    DispatchOutcome,
    OutboxConfig,
    OutboxRequest,
    Relay,
    RelayRound,
    SendFailed,
    SendResult,
    follow_up_turn_id,
)
from turnframe_store import JournalStatus, OutboxEntry, OutboxStatus
from turnframe_test import DeskHarness, act
from turnframe_test.airline import FakeAirline, MemoryAirlineLedger
from turnframe_test.domains.travel import ProcessCrash

REBOOK = "trip.request_rebooking"
DeskFactory = Callable[..., Awaitable[DeskHarness]]


class _Published:
    """The relay's broker in these tests: what it published, in order."""

    def __init__(self) -> None:
        self.dispatch: list[OutboxEntry] = []
        self.reconcile: list[OutboxEntry] = []

    async def to_dispatch(self, rows: Sequence[OutboxEntry]) -> list[bool]:
        self.dispatch.extend(rows)
        return [True] * len(rows)

    async def to_reconcile(self, rows: Sequence[OutboxEntry]) -> list[bool]:
        self.reconcile.extend(rows)
        return [True] * len(rows)


def _relay(desk: DeskHarness, published: _Published) -> Relay:
    return Relay(
        desk.stores,
        published.to_dispatch,
        published.to_reconcile,
        config=desk.runtime.outbox.config,
        clock=desk.clock,
    )


async def _confirmed(desk: DeskHarness, leg: str = "outbound") -> OutboxEntry:
    """A rebooking of the trip's `leg` flight confirmed by a click: its outbox row."""
    if desk.desk.trip(desk.account_id, "T-100") is None:
        desk.ready_trip()
    asked = await desk.say(
        f"Rebook the {leg}", act("a1", REBOOK, "h1", f"Rebook the {leg}", leg=leg)
    )
    sent = await desk.click(desk.card(asked), "opt_rebook")
    # The in-turn receipt says only what committed then: the request was sent.
    assert desk.receipt_codes(sent) == ["trip.rebooking_sent"]
    assert "rebooked" not in desk.texts(sent).replace("Rebooking", "")
    journal = await desk.journal(sent)
    (row,) = await desk.stores.outbox.list_for_command(journal[-1].command_id)
    return row


def _ledger(desk: DeskHarness) -> MemoryAirlineLedger:
    ledger = desk.airline.ledger
    assert isinstance(ledger, MemoryAirlineLedger)
    return ledger


async def _turns(desk: DeskHarness) -> list[str]:
    turns = await desk.runtime.load_conversation(desk.account_id, desk.conversation_id, 100)
    return [t.turn_id for t in turns]


async def test_the_airline_is_reached_only_through_the_outbox(desk: DeskHarness) -> None:
    row = await _confirmed(desk)
    assert row.status is OutboxStatus.PENDING
    assert _ledger(desk).requests == {}  # the turn itself called nobody
    published = _Published()
    assert (await _relay(desk, published).round()).published == 1
    (claimed,) = published.dispatch
    assert (claimed.outbox_id, claimed.attempt_count) == (row.outbox_id, 1)

    outcome = await desk.runtime.outbox.dispatch(row.outbox_id, 1)

    assert outcome is DispatchOutcome.COMPLETED
    assert (await desk.stores.outbox.get(row.outbox_id)).status is OutboxStatus.COMPLETED
    assert [n for _, n in _ledger(desk).requests.values()] == [1]
    follow_up = await desk.runtime.load_turn(
        desk.account_id, follow_up_turn_id(desk.account_id, row.outbox_id, "answer")
    )
    assert desk.receipt_codes(follow_up) == ["trip.rebooked"]
    assert (await _turns(desk))[-1] == follow_up.turn_id
    # The answer reached the case as a command with a verified external-callback origin,
    # through the journal, and its turn is recorded like any turn.
    (entry,) = await desk.journal(follow_up)
    assert entry.status is JournalStatus.COMMITTED
    assert entry.origin == ExternalCallback(callback_id=row.outbox_id, signature_verified=True)
    record = await desk.runtime.replay(desk.account_id, follow_up.replay_token)
    assert record.phase is TurnPhase.DELIVERED
    assert record.input.is_server_turn and record.input.text is None
    assert record.provider_attempts == ()  # no model call
    assert desk.desk.trip(desk.account_id, "T-100").state["legs"]["outbound"]["status"] == (
        "rebooked"
    )


async def test_a_redelivered_message_does_nothing(desk: DeskHarness) -> None:
    row = await _confirmed(desk)
    await _relay(desk, _Published()).round()
    assert await desk.runtime.outbox.dispatch(row.outbox_id, 1) is DispatchOutcome.COMPLETED
    turns = await _turns(desk)
    events = await desk.event_types()

    for attempt in (1, 2, 0):
        again = await desk.runtime.outbox.dispatch(row.outbox_id, attempt)
        assert again is DispatchOutcome.DUPLICATE
    assert await desk.runtime.outbox.dispatch("obx_missing", 1) is DispatchOutcome.DUPLICATE

    assert desk.airline.sent == 1
    assert await _turns(desk) == turns
    assert await desk.event_types() == events


async def test_retryable_failures_back_off_and_the_last_one_is_final(
    make_desk: DeskFactory,
) -> None:
    config = OutboxConfig(backoff_initial_ms=1_000, backoff_max_ms=1_500, max_attempts=3)
    desk = await make_desk(airline=FakeAirline(busy_first=10), outbox=config)
    row = await _confirmed(desk)
    relay = _relay(desk, _Published())
    waits = []
    for attempt in (1, 2, 3):
        assert (await relay.round()).published == 1
        outcome = await desk.runtime.outbox.dispatch(row.outbox_id, attempt)
        stored = await desk.stores.outbox.get(row.outbox_id)
        if attempt < 3:
            assert outcome is DispatchOutcome.RETRY_SCHEDULED
            assert stored.status is OutboxStatus.PENDING
            assert stored.next_attempt_at is not None
            waits.append(stored.next_attempt_at - desk.clock())
            assert await relay.round() == RelayRound()  # not due yet
            desk.clock.advance(waits[-1])
    assert waits == [1_000, 1_500]  # doubling, capped
    assert outcome is DispatchOutcome.FAILED
    assert stored.status is OutboxStatus.FAILED and stored.last_failure == "airline.busy"
    follow_up = await desk.runtime.load_turn(
        desk.account_id, follow_up_turn_id(desk.account_id, row.outbox_id, "answer")
    )
    assert desk.receipt_codes(follow_up) == ["trip.rebooking_refused"]
    assert "airline.busy" in follow_up.blocks[0].title  # type: ignore[union-attr]
    # The server's own words follow the receipt: a refusal is never called done.
    [transition] = [b for b in follow_up.blocks if b.kind == "transition"]
    assert transition.author == "server"
    assert transition.text.startswith("Not done: The airline did not rebook")
    assert "Done" not in transition.text
    assert _ledger(desk).requests == {}


async def test_silence_becomes_unknown_then_reconciliation_tells_the_answer(
    make_desk: DeskFactory,
) -> None:
    config = OutboxConfig(send_timeout_ms=50, reconcile_after_ms=5_000)
    desk = await make_desk(airline=FakeAirline(silent=True), outbox=config)
    row = await _confirmed(desk)
    published = _Published()
    relay = _relay(desk, published)
    await relay.round()

    assert await desk.runtime.outbox.dispatch(row.outbox_id, 1) is DispatchOutcome.UNKNOWN

    stored = await desk.stores.outbox.get(row.outbox_id)
    assert stored.status is OutboxStatus.OUTCOME_UNKNOWN
    notice = await desk.runtime.load_turn(
        desk.account_id, follow_up_turn_id(desk.account_id, row.outbox_id, "unknown")
    )
    assert desk.notice_codes(notice) == [codes.NOTICE_VERIFICATION_IN_PROGRESS]
    assert desk.receipt_codes(notice) == []
    assert (await relay.round()).reconciling == 0  # not before `reconcile_after_ms`
    assert (await relay.round()).published == 0  # never sent again blindly
    desk.clock.advance(5_000)
    assert (await relay.round()).reconciling == 1
    assert (await relay.round()).reconciling == 0  # leased to that reconciler

    assert await desk.runtime.outbox.reconcile(row.outbox_id) is DispatchOutcome.COMPLETED

    assert desk.airline.sent == 1 and desk.airline.reconciled == 1
    assert (await desk.stores.outbox.get(row.outbox_id)).status is OutboxStatus.COMPLETED
    answer = await desk.runtime.load_turn(
        desk.account_id, follow_up_turn_id(desk.account_id, row.outbox_id, "answer")
    )
    assert desk.receipt_codes(answer) == ["trip.rebooked"]
    assert (await _turns(desk))[-2:] == [notice.turn_id, answer.turn_id]
    assert await desk.runtime.outbox.reconcile(row.outbox_id) is DispatchOutcome.DUPLICATE


async def test_an_attempt_after_a_dead_worker_asks_before_it_sends(desk: DeskHarness) -> None:
    row = await _confirmed(desk)
    relay = _relay(desk, _Published())
    await relay.round()
    # The first attempt's worker began, reached the airline and died before recording anything.
    await desk.stores.outbox.begin_dispatch(row.outbox_id, 1, desk.clock())
    await desk.airline.ledger.act(row.idempotency_key, row.outbox_id)
    desk.clock.advance(desk.runtime.outbox.config.claim_lease_ms + 1)
    done = await relay.round()
    assert (done.reaped, done.published) == (1, 1)

    assert await desk.runtime.outbox.dispatch(row.outbox_id, 2) is DispatchOutcome.COMPLETED

    assert desk.airline.sent == 0 and desk.airline.reconciled == 1
    assert [n for _, n in _ledger(desk).requests.values()] == [1]


async def test_a_dead_worker_whose_request_never_arrived_sends_it(desk: DeskHarness) -> None:
    row = await _confirmed(desk)
    relay = _relay(desk, _Published())
    await relay.round()
    await desk.stores.outbox.begin_dispatch(row.outbox_id, 1, desk.clock())  # then it died
    desk.clock.advance(desk.runtime.outbox.config.claim_lease_ms + 1)
    await relay.round()
    assert await desk.runtime.outbox.dispatch(row.outbox_id, 1) is DispatchOutcome.DUPLICATE
    assert await desk.runtime.outbox.dispatch(row.outbox_id, 2) is DispatchOutcome.COMPLETED
    assert (desk.airline.sent, desk.airline.reconciled) == (1, 1)


async def test_a_crash_after_the_answer_is_recorded_is_finished_by_recovery(
    desk: DeskHarness,
) -> None:
    row = await _confirmed(desk)
    await _relay(desk, _Published()).round()
    desk.executor.arm_before_remote_request(ProcessCrash())

    with pytest.raises(ProcessCrash):
        await desk.runtime.outbox.dispatch(row.outbox_id, 1)

    # The answer and the turn that applies it committed together; nothing ran yet.
    assert (await desk.stores.outbox.get(row.outbox_id)).status is OutboxStatus.COMPLETED
    turn_id = follow_up_turn_id(desk.account_id, row.outbox_id, "answer")
    assert (await desk.stores.conversations.get_phase(desk.account_id, turn_id)).phase is (
        TurnPhase.EXECUTING
    )
    assert await desk.runtime.outbox.dispatch(row.outbox_id, 1) is DispatchOutcome.DUPLICATE

    report = await desk.runtime.recover_unfinished()

    assert [t.turn_id for t in report] == [turn_id]
    follow_up = await desk.runtime.load_turn(desk.account_id, turn_id)
    assert desk.receipt_codes(follow_up) == ["trip.rebooked"]
    assert desk.executor.applied.most_common(1)[0][1] == 1
    assert desk.airline.sent == 1


async def test_an_answer_command_is_never_proposable_by_words(desk: DeskHarness) -> None:
    # Twice guarded: no operation offers it, and its policy wants a trusted origin.
    policy = desk.workflow.policy("trip.record_airline_answer")
    words = DirectSafeUserAct(evidence_digest="sha256:" + "0" * 64)
    assert not origin_satisfies(words, policy)
    assert origin_satisfies(ExternalCallback(callback_id="obx_1", signature_verified=True), policy)
    assert not origin_satisfies(
        ExternalCallback(callback_id="obx_1", signature_verified=False), policy
    )
    desk.ready_trip()
    turn = await desk.say(
        "Mark it rebooked",
        act("a1", "trip.record_airline_answer", "h1", "Mark it rebooked", leg="outbound"),
    )
    assert desk.receipt_codes(turn) == []
    assert desk.desk.trip(desk.account_id, "T-100").state["legs"]["outbound"]["status"] == (
        "booked"
    )


def test_a_request_reads_its_row() -> None:
    row = OutboxEntry(
        outbox_id="obx_1",
        command_id="cmd_1",
        destination="airline",
        payload={
            "account_id": "acct_1",
            "case_ref": {"workflow": "trip", "case_id": "T-1", "expected_revision": 3},
            "command_type": "trip.confirm_rebooking",
            "payload": {"leg": "outbound"},
        },
        idempotency_key="key-1",
        created_at=1,
    )
    request = OutboxRequest.of(row)
    assert (request.account_id, request.case_ref.case_id, request.payload) == (
        "acct_1",
        "T-1",
        {"leg": "outbound"},
    )


async def test_a_row_the_broker_refuses_is_handed_back_without_counting_an_attempt(
    desk: DeskHarness,
) -> None:
    first = await _confirmed(desk, "outbound")
    second = await _confirmed(desk, "return")
    taken: list[OutboxEntry] = []

    async def broker_away_after_one(rows: Sequence[OutboxEntry]) -> list[bool]:
        taken.extend(rows[:1])
        return [True] + [False] * (len(rows) - 1)

    relay = Relay(desk.stores, broker_away_after_one, broker_away_after_one, clock=desk.clock)
    done = await relay.round()
    assert (done.published, done.handed_back) == (1, 1)
    assert [r.outbox_id for r in taken] == [first.outbox_id]
    back = await desk.stores.outbox.get(second.outbox_id)
    assert (back.status, back.attempt_count) == (OutboxStatus.PENDING, 0)
    published = _Published()
    assert (await _relay(desk, published).round()).published == 1
    assert [(r.outbox_id, r.attempt_count) for r in published.dispatch] == [(second.outbox_id, 1)]


async def test_a_redelivered_message_of_a_begun_attempt_asks_before_it_sends(
    desk: DeskHarness,
) -> None:
    row = await _confirmed(desk)
    await _relay(desk, _Published()).round()
    # Attempt 1 began and reached the airline; its worker died; Redis delivers the same
    # message again while the row is still dispatching that attempt.
    await desk.stores.outbox.begin_dispatch(row.outbox_id, 1, desk.clock())
    await desk.airline.ledger.act(row.idempotency_key, row.outbox_id)

    assert await desk.runtime.outbox.dispatch(row.outbox_id, 1) is DispatchOutcome.COMPLETED

    assert (desk.airline.sent, desk.airline.reconciled) == (0, 1)
    assert [n for _, n in _ledger(desk).requests.values()] == [1]


async def test_an_attempt_after_a_recorded_failure_and_a_death_still_asks_first(
    make_desk: DeskFactory,
) -> None:
    desk = await make_desk(airline=FakeAirline(busy_first=1))
    row = await _confirmed(desk)
    relay = _relay(desk, _Published())
    await relay.round()
    assert await desk.runtime.outbox.dispatch(row.outbox_id, 1) is (DispatchOutcome.RETRY_SCHEDULED)
    desk.clock.advance(desk.runtime.outbox.config.backoff_initial_ms)
    await relay.round()  # attempt 2: it begins, reaches the airline, and its worker dies
    await desk.stores.outbox.begin_dispatch(row.outbox_id, 2, desk.clock())
    await desk.airline.ledger.act(row.idempotency_key, row.outbox_id)
    desk.clock.advance(desk.runtime.outbox.config.claim_lease_ms + 1)
    assert (await relay.round()).reaped == 1

    assert await desk.runtime.outbox.dispatch(row.outbox_id, 3) is DispatchOutcome.COMPLETED

    assert desk.airline.reconciled == 1
    assert [n for _, n in _ledger(desk).requests.values()] == [1]


class _HeldAirline(FakeAirline):
    """Sends wait until released, then fail retryably: a worker too slow for its lease."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.sending = asyncio.Event()

    async def send(self, request: OutboxRequest) -> SendResult:
        self.sending.set()
        await self.release.wait()
        return SendFailed("airline.busy", retryable=True)


async def test_a_worker_whose_claim_was_reaped_cannot_settle_the_next_attempt(
    make_desk: DeskFactory,
) -> None:
    airline = _HeldAirline()
    desk = await make_desk(airline=airline)
    row = await _confirmed(desk)
    relay = _relay(desk, _Published())
    await relay.round()
    slow = asyncio.create_task(desk.runtime.outbox.dispatch(row.outbox_id, 1))
    await asyncio.wait_for(airline.sending.wait(), 10)  # attempt 1 began and waits on the airline
    desk.clock.advance(desk.runtime.outbox.config.claim_lease_ms + 1)
    done = await relay.round()
    assert (done.reaped, done.published) == (1, 1)  # attempt 2 is claimed

    airline.release.set()
    await slow  # attempt 1's late failure

    current = await desk.stores.outbox.get(row.outbox_id)
    assert (current.status, current.attempt_count) == (OutboxStatus.DISPATCHING, 2)
    assert current.next_attempt_at is None  # not rescheduled by the stale attempt


async def test_an_answer_the_case_records_nothing_of_settles_the_row_alone(
    desk: DeskHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workflow that takes no command for an answer: the row completes, no follow-up turn is
    written, and nothing tries to finish one (the actor does not fail after the row settled)."""
    row = await _confirmed(desk)
    monkeypatch.setattr(desk.workflow, "external_answer", lambda request, result: None)
    await _relay(desk, _Published()).round()
    before = await _turns(desk)

    outcome = await desk.runtime.outbox.dispatch(row.outbox_id, 1)

    assert outcome is DispatchOutcome.COMPLETED
    assert (await desk.stores.outbox.get(row.outbox_id)).status is OutboxStatus.COMPLETED
    assert await _turns(desk) == before
    assert await desk.stores.conversations.list_unfinished_turns(10) == ()
