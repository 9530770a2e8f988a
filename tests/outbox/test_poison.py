"""Outbox rows that cannot be carried through end, on every backend: an answer no store can
record (a failure code holding NUL, a reference holding a lone surrogate, a workflow whose
`external_answer` raises) ends its row `failed` with a stable code, tells the conversation once
that the result could not be confirmed, and is counted; a sender that ignores its cancellation
costs its attempt `send_timeout_ms`, never a worker's thread."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from turnframe_core import codes
from turnframe_runtime import (
    DispatchOutcome,
    OutboxConfig,
    OutboxRequest,
    OutboxWorker,
    SendCompleted,
    SendFailed,
    SendResult,
    connect_broker,
    follow_up_turn_id,
)
from turnframe_store import OutboxEntry, OutboxStatus
from turnframe_test import DeskHarness, act
from turnframe_test.airline import FakeAirline
from turnframe_test.domains.travel import TripWorkflow
from turnframe_test.telemetry_kit import captured_telemetry

DeskFactory = Callable[..., Awaitable[DeskHarness]]


class _Answers(FakeAirline):
    """An airline that answers with what it is given."""

    def __init__(self, answer: SendResult) -> None:
        super().__init__()
        self.answer = answer

    async def send(self, request: OutboxRequest) -> SendResult:
        self.sent += 1
        return self.answer


class _RaisingAnswers(TripWorkflow):
    def external_answer(self, request: Any, result: Any) -> Any:
        raise RuntimeError("the workflow cannot read this answer")


async def _confirmed(desk: DeskHarness) -> OutboxEntry:
    desk.ready_trip()
    said = "Rebook the outbound"
    asked = await desk.say(said, act("a1", "trip.request_rebooking", "h1", said, leg="outbound"))
    sent = await desk.click(desk.card(asked), "opt_rebook")
    journal = await desk.journal(sent)
    (row,) = await desk.stores.outbox.list_for_command(journal[-1].command_id)
    claimed = await desk.stores.outbox.claim_due(desk.clock(), 10, "worker_test")
    assert [r.outbox_id for r in claimed] == [row.outbox_id]
    return row


@pytest.mark.parametrize(
    ("answer", "workflow"),
    [
        (SendFailed("airline.\x00busy"), None),
        (SendCompleted(reference="K7\ud800M"), None),
        (SendCompleted(reference="K7XQ2M"), _RaisingAnswers()),
    ],
    ids=["code-with-nul", "reference-with-lone-surrogate", "external-answer-raises"],
)
async def test_an_answer_that_cannot_be_recorded_ends_its_row_failed_and_says_so_once(
    make_desk: DeskFactory, answer: SendResult, workflow: TripWorkflow | None
) -> None:
    telemetry = captured_telemetry()
    airline = _Answers(answer)
    desk = await make_desk(airline=airline, **({"workflow": workflow} if workflow else {}))
    row = await _confirmed(desk)

    outcome = await desk.runtime.outbox.dispatch(row.outbox_id, 1)

    assert outcome is DispatchOutcome.FAILED
    stored = await desk.stores.outbox.get(row.outbox_id)
    assert (stored.status, stored.last_failure) == (
        OutboxStatus.FAILED,
        codes.OUTBOX_ANSWER_UNRECORDABLE,
    )
    told = await desk.runtime.load_turn(
        desk.account_id, follow_up_turn_id(desk.account_id, row.outbox_id, "answer")
    )
    assert desk.notice_codes(told) == [codes.NOTICE_RESULT_UNCONFIRMED]
    assert desk.receipt_codes(told) == []
    # A redelivered message, or a second attempt, changes nothing and tells nobody again.
    assert await desk.runtime.outbox.dispatch(row.outbox_id, 1) is DispatchOutcome.DUPLICATE
    assert await desk.runtime.outbox.dispatch(row.outbox_id, 2) is DispatchOutcome.DUPLICATE
    assert await desk.stores.outbox.claim_due(desk.clock() + 10**9, 10, "worker_2") == ()
    turns = await desk.runtime.load_conversation(desk.account_id, desk.conversation_id, 100)
    assert [t.turn_id for t in turns].count(told.turn_id) == 1
    assert airline.sent == 1
    poisoned = [
        attributes
        for name, attributes, _ in telemetry.metric_points()
        if name == "turnframe.outbox.poisoned"
    ]
    assert poisoned == [{"turnframe.code": codes.OUTBOX_ANSWER_UNRECORDABLE}]


class _Deaf(FakeAirline):
    """A sender that ignores its cancellation: it keeps the request until `release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.cancelled = 0

    async def send(self, request: OutboxRequest) -> SendResult:
        self.sent += 1
        while not self.release.is_set():
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled += 1  # and carries on regardless
        return SendCompleted(reference="late")


async def test_a_sender_that_ignores_cancellation_ends_unknown_at_the_send_timeout(
    make_desk: DeskFactory,
) -> None:
    airline = _Deaf()
    desk = await make_desk(airline=airline, outbox=OutboxConfig(send_timeout_ms=50))
    row = await _confirmed(desk)
    try:
        outcome = await asyncio.wait_for(desk.runtime.outbox.dispatch(row.outbox_id, 1), 10)
        assert outcome is DispatchOutcome.UNKNOWN
        assert (await desk.stores.outbox.get(row.outbox_id)).status is OutboxStatus.OUTCOME_UNKNOWN
        assert airline.cancelled == 1  # it was asked to stop, and did not
    finally:
        airline.release.set()


async def test_a_worker_whose_sender_ignores_cancellation_still_stops(
    make_desk: DeskFactory,
) -> None:
    airline = _Deaf()
    desk = await make_desk(airline=airline, outbox=OutboxConfig(send_timeout_ms=50, poll_ms=10))
    desk.ready_trip()
    said = "Rebook the outbound"
    asked = await desk.say(said, act("a1", "trip.request_rebooking", "h1", said, leg="outbound"))
    await desk.click(desk.card(asked), "opt_rebook")
    worker = OutboxWorker(desk.runtime, connect_broker("stub://"), threads=1)
    await worker.start()

    async def cancelled_once() -> None:
        while not airline.cancelled:
            await asyncio.sleep(0.01)

    try:
        await asyncio.wait_for(cancelled_once(), 30)  # the actor's attempt timed out
    finally:
        await asyncio.wait_for(worker.stop(), 10)  # the actor's thread came back
        airline.release.set()
    assert airline.sent == 1
