"""The dispatch and reconcile actors' work: one outbox row carried out, and its answer recorded.

Rules (DESIGN §7):
- A message names a row and the attempt its claim made. A row that is no longer dispatching
  that attempt was carried out (or handed on) already: the message is a redelivery and does
  nothing.
- An attempt after one whose outcome was never recorded (its worker died) asks the destination
  first (`reconcile`) and sends only when the destination never received the key.
- A retryable failure goes back to pending with backoff; the last attempt's failure is final.
- An unknown outcome (a timeout, a sender that raised) is never sent again blindly: the row
  becomes `outcome_unknown`, the conversation is told that verification is in progress (a
  server-written turn), and the reconciler asks the destination until it knows.
- A row's follow-up turns (`follow_up_turn_id`), one per purpose: `unknown` tells that
  verification is in progress (at most once, only when an attempt's outcome became unknown);
  `answer` is the turn that answers the row: the final answer (completed or failed, sent or
  reconciled) or the row's poisoning. The `answer` turn is written for every final answer of a
  row that names a conversation, except a completed one its case records nothing of (the
  workflow's `external_answer` returns None, or a command its policy refuses to an external
  callback, or the case is gone): that row settles alone. `answer_turn` says which, ahead of
  the answer.
- A final answer is recorded in ONE transaction with the follow-up turn that applies it: the
  outbox status, the user-less turn, and the journaled command (a verified external-callback
  origin) that records the answer on the case. That command then runs through the executor,
  the journal and the commit bundle like any command, and the turn's reply is composed from
  the ledger with server copy only (the recovery path, so a crash anywhere after the recording
  transaction is finished by `recover_unfinished` the same way).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from turnframe_core import codes
from turnframe_core.cases import CaseKey
from turnframe_core.commands import CommandPolicy, ExternalCallback, origin_satisfies
from turnframe_core.ids import derive_id
from turnframe_core.workflow import CompiledCommand, Workflow
from turnframe_runtime import observe
from turnframe_runtime.accept import PreviousTurnUnfinished, accept_turn
from turnframe_runtime.config import OutboxConfig
from turnframe_runtime.outbox.ports import (
    NotReceived,
    OutboxRequest,
    OutboxSender,
    SendCompleted,
    SendFailed,
    SendResult,
    SendUnknown,
)
from turnframe_runtime.reduce import CaseInView, PlannedCommand, envelope_for
from turnframe_runtime.server_turn import server_turn, tell
from turnframe_runtime.state import TurnState
from turnframe_store.bundle import Stores
from turnframe_store.errors import Conflict, InvalidRecord, NotFound, StoreError
from turnframe_store.records import OUTBOX_CLAIM_EXPIRED, OutboxEntry, OutboxStatus

if TYPE_CHECKING:
    from turnframe_runtime.kernel import Kernel

__all__ = ["DispatchOutcome", "NoSender", "OutboxDispatcher", "follow_up_turn_id"]

_LOG = logging.getLogger(__name__)

#: the act id of the command that records an external answer (it has no user act)
_ANSWER_ACT = "external_answer"


class DispatchOutcome(StrEnum):
    """What one dispatch or reconciliation did."""

    COMPLETED = "completed"
    FAILED = "failed"
    RETRY_SCHEDULED = "retry_scheduled"
    UNKNOWN = "outcome_unknown"
    STILL_UNKNOWN = "still_unknown"
    RESENT = "resent"
    #: the row had moved on: a redelivered or stale message, nothing done
    DUPLICATE = "duplicate"


class NoSender(LookupError):
    """This worker has no sender for the row's destination (its claim was handed back)."""


def follow_up_turn_id(account_id: str, outbox_id: str, purpose: str) -> str:
    """The id of the turn that tells a row's conversation about it: one per row and purpose
    (`answer`: the turn that answers the row; `unknown`: the one that says verification is in
    progress), so a second writer of the same follow-up meets the first's turn."""
    return derive_id(
        "turn",
        "turnframe.follow_up_turn.v1",
        {"account_id": account_id, "outbox_id": outbox_id, "purpose": purpose},
    )


class OutboxDispatcher:
    """Carries out outbox rows for one runtime's kernel, with its senders (by destination)."""

    def __init__(
        self,
        kernel: Kernel,
        senders: Mapping[str, OutboxSender],
        config: OutboxConfig | None = None,
    ) -> None:
        self.kernel = kernel
        self._senders = dict(senders)
        self.config = config or OutboxConfig()

    @property
    def stores(self) -> Stores:
        return self.kernel.stores

    def _now(self) -> int:
        return self.kernel.clock()

    # --- the actors' bodies ----------------------------------------------------------------------

    async def dispatch(self, outbox_id: str, attempt: int) -> DispatchOutcome:
        """Carry out the row's claimed attempt `attempt` (see the module's rules)."""
        with observe.span("outbox.dispatch", outbox_id=outbox_id, attempt=attempt):
            outcome = await self._dispatch(outbox_id, attempt)
        observe.count("outbox.dispatched", outcome=outcome.value)
        if outcome is DispatchOutcome.UNKNOWN:
            observe.count("outbox.unknown")
        observe.event(_LOG, "outbox.dispatched", outbox_id=outbox_id, attempt=attempt,
                      outcome=outcome.value)  # fmt: skip
        return outcome

    async def _dispatch(self, outbox_id: str, attempt: int) -> DispatchOutcome:
        outbox = self.stores.outbox
        try:
            row = await outbox.begin_dispatch(outbox_id, attempt, self._now())
            first = True
        except NotFound:
            return DispatchOutcome.DUPLICATE
        except Conflict:  # moved on, or this attempt began before (a redelivered message)
            try:
                row = await outbox.get(outbox_id)
            except NotFound:
                return DispatchOutcome.DUPLICATE
            if row.status is not OutboxStatus.DISPATCHING or row.attempt_count != attempt:
                return DispatchOutcome.DUPLICATE
            first = False
            observe.count("outbox.redelivered")
        sender = self._senders.get(row.destination)
        if sender is None:
            if row.claim_worker_id is not None:
                await outbox.unclaim(row.outbox_id, row.claim_worker_id)
            raise NoSender(f"no sender for the destination {row.destination!r}")
        request = OutboxRequest.of(row)
        result: SendResult | None = None
        if not first or row.last_failure == OUTBOX_CLAIM_EXPIRED:
            # This attempt, or the one before it, began and recorded no answer: it may have
            # reached the destination, which is asked before anything is sent again.
            asked = await self._ask(sender.reconcile, request)
            result = None if isinstance(asked, NotReceived) else asked
        if result is None:
            sent = await self._ask(sender.send, request)
            result = sent if not isinstance(sent, NotReceived) else SendUnknown("not_received")
        if isinstance(result, SendFailed) and result.retryable:
            if attempt < self.config.max_attempts:
                retry_at = self._now() + self.config.backoff_ms(attempt)
                with contextlib.suppress(Exception):  # else the claim stays; the reaper acts
                    await outbox.mark_failed(row.outbox_id, result.code, retry_at, attempt)
                return DispatchOutcome.RETRY_SCHEDULED
            result = SendFailed(result.code, retryable=False, detail=result.detail)
        if isinstance(result, SendUnknown):
            return await self._unknown(row, result)
        return await self._answer(row, request, result)

    async def reconcile(self, outbox_id: str) -> DispatchOutcome:
        """Settle an unknown outcome by asking the destination."""
        with observe.span("outbox.reconcile", outbox_id=outbox_id):
            outcome = await self._reconcile(outbox_id)
        observe.count("external.reconciled", outcome=outcome.value)
        observe.event(_LOG, "outbox.reconciled", outbox_id=outbox_id, outcome=outcome.value)
        return outcome

    async def _reconcile(self, outbox_id: str) -> DispatchOutcome:
        try:
            row = await self.stores.outbox.get(outbox_id)
        except NotFound:
            return DispatchOutcome.DUPLICATE
        if row.status is not OutboxStatus.OUTCOME_UNKNOWN:
            return DispatchOutcome.DUPLICATE
        sender = self._senders.get(row.destination)
        if sender is None:
            raise NoSender(f"no sender for the destination {row.destination!r}")
        request = OutboxRequest.of(row)
        result = await self._ask(sender.reconcile, request)
        if isinstance(result, NotReceived):
            await self.stores.outbox.reschedule(row.outbox_id, self._now())
            return DispatchOutcome.RESENT
        if isinstance(result, SendUnknown) or (isinstance(result, SendFailed) and result.retryable):
            return DispatchOutcome.STILL_UNKNOWN  # its lease brings it back later
        return await self._answer(row, request, result)

    async def _ask(
        self,
        call: Callable[[OutboxRequest], Awaitable[SendResult | NotReceived]],
        request: OutboxRequest,
    ) -> SendResult | NotReceived:
        """The sender's answer within the send timeout; silence or an error is unknown. At the
        timeout the sender's task is cancelled and left behind, never awaited: a sender that
        ignores its cancellation cannot hold this attempt (or a worker's thread) past it."""
        sending = asyncio.ensure_future(call(request))
        try:
            done, _ = await asyncio.wait({sending}, timeout=self.config.send_timeout_ms / 1000)
        except BaseException:  # this attempt itself was cancelled: so is the sender's call
            sending.cancel()
            raise
        if not done:
            sending.cancel()
            sending.add_done_callback(_forget)
            return SendUnknown("timeout")
        try:
            answer = sending.result()
        except Exception as error:
            return SendUnknown(f"sender_error:{type(error).__name__}")
        if not isinstance(answer, SendCompleted | SendFailed | SendUnknown | NotReceived):
            return SendUnknown("unreadable_answer")
        return answer

    # --- the follow-up turns ---------------------------------------------------------------------

    async def _unknown(self, row: OutboxEntry, result: SendUnknown) -> DispatchOutcome:
        """outcome_unknown, and the conversation told that verification is in progress, in one
        transaction (told once per row, whatever attempt ends unknown)."""
        check_at = self._now() + self.config.reconcile_after_ms

        async def record(tx: Stores, t: TurnState | None) -> bool:
            # A row that moved on from this attempt refuses (`Conflict`: a duplicate).
            await tx.outbox.mark_outcome_unknown(
                row.outbox_id, result.reference, check_at, row.attempt_count
            )
            if t is not None and not await _told(tx, t):
                await self._tell(tx, t, codes.NOTICE_VERIFICATION_IN_PROGRESS)
            return True

        try:
            recorded = await self._follow_up(row, "unknown", record)
        except _Unrecordable:  # e.g. a reference no store can hold: the outcome stays unknown
            if result.reference is None:
                raise
            return await self._unknown(row, SendUnknown(result.reason))
        return DispatchOutcome.UNKNOWN if recorded else DispatchOutcome.DUPLICATE

    async def _answer(
        self, row: OutboxEntry, request: OutboxRequest, result: SendCompleted | SendFailed
    ) -> DispatchOutcome:
        """The answer recorded with the follow-up turn that applies it (one transaction), then
        that turn finished like any interrupted turn."""
        completed = isinstance(result, SendCompleted)

        async def record(tx: Stores, t: TurnState | None) -> bool:
            await self._settle_row(tx, row, result)
            if t is None:
                return True
            case = t.cases.get(request.case_ref.key)
            loaded = [case] if case else []
            recording = None if case is None else _recording(case.workflow, request, result)
            if not _writes_turn(result, recording):
                return True  # the row settles alone
            planned = []
            if case is not None and recording is not None:
                planned = self._answer_command(t, case, recording)
            if planned:
                user_turn, t.recorder.record = await accept_turn(tx, t.ctx, loaded)
                await t.execution.admit(tx, None, planned, user_turn)
            else:  # nothing records it on the case: the user is told it failed
                await self._tell(tx, t, codes.NOTICE_COMMAND_FAILED, loaded)
            return True

        # The case is read before the transaction (the domain's I/O holds no store transaction).
        try:
            recorded = await self._follow_up(
                row, "answer", record, load=request.case_ref.key, finish=True
            )
        except _Unrecordable:
            return await self._poisoned(row)
        if not recorded:
            return DispatchOutcome.DUPLICATE
        return DispatchOutcome.COMPLETED if completed else DispatchOutcome.FAILED

    async def _poisoned(self, row: OutboxEntry) -> DispatchOutcome:
        """An answer that can never be recorded ends the row `failed` with a stable code, and
        the conversation is told once that the result could not be confirmed (nothing is shown
        as done); it is counted (`outbox.poisoned`) for a person to check with the
        destination. Were even that impossible, the row alone ends failed."""
        code = codes.OUTBOX_ANSWER_UNRECORDABLE

        async def settle(tx: Stores, t: TurnState | None) -> bool:
            await tx.outbox.mark_failed(row.outbox_id, code, None, row.attempt_count)
            if t is not None and not await _told(tx, t):
                await self._tell(tx, t, codes.NOTICE_RESULT_UNCONFIRMED)
            return True

        try:
            recorded = await self._follow_up(row, "answer", settle)
        except _Unrecordable:
            recorded = await self._recorded(settle, None)
        if not recorded:
            return DispatchOutcome.DUPLICATE
        observe.count("outbox.poisoned", code=code)
        observe.event(_LOG, "outbox.poisoned", logging.WARNING, outbox_id=row.outbox_id, code=code)
        return DispatchOutcome.FAILED

    def _answer_command(
        self, t: TurnState, case: CaseInView, recording: _Recording
    ) -> list[PlannedCommand]:
        """The command that records the answer, planned in the follow-up turn with its verified
        callback origin; none when its policy refuses an external callback (the refusal is
        audited with the turn)."""
        envelope = envelope_for(
            t.ctx.account_id,
            t.ctx.turn_id,
            _ANSWER_ACT,
            0,
            case.case_ref,
            recording.origin,
            recording.command,
        )
        if not recording.allowed:
            t.audit.decided(envelope, recording.policy, False)
            return []
        return [PlannedCommand(_ANSWER_ACT, envelope, recording.policy)]  # admitting records it

    async def answer_turn(self, row: OutboxEntry) -> str | None:
        """The id of the turn that answers `row` (purpose `answer`), or None when its answer
        writes no turn (see the module's rules). For a row already answered, whether that turn
        was written; for one still to be answered, whether it will be, judged as `_answer`
        judges a completed answer (a failed one always writes it): by the workflow's
        `external_answer` for a completed result and its policy for an external callback. A
        workflow whose answer depends on the destination's reference, or a case gone by the
        time the answer comes, can make the promise wrong; neither is known ahead."""
        where = await self._conversation_of(row)
        if where is None:
            return None
        account_id = where[0]
        turn_id = follow_up_turn_id(account_id, row.outbox_id, "answer")
        if row.status.is_terminal:
            try:
                await self.stores.conversations.get_user_turn(account_id, turn_id)
            except NotFound:
                return None
            return turn_id
        try:
            request = OutboxRequest.of(row)
        except (KeyError, ValueError):  # a body no answer can be recorded from: poisoned, told
            return turn_id
        workflow = self.kernel.workflows.get(request.case_ref.workflow)
        completed = SendCompleted(reference=request.outbox_id)
        try:
            recording = None if workflow is None else _recording(workflow, request, completed)
        except Exception:  # a workflow that raises poisons the row: its answer turn tells that
            return turn_id
        return turn_id if _writes_turn(completed, recording) else None

    async def _tell(
        self, tx: Stores, t: TurnState, notice: str, loaded: Sequence[CaseInView] = ()
    ) -> None:
        """A follow-up turn that runs nothing: its notice composed from server copy and
        delivered with the user-less turn, in the caller's transaction."""
        await tell(self.kernel, tx, t, notice=notice, loaded=loaded)

    async def _settle_row(
        self, tx: Stores, row: OutboxEntry, result: SendCompleted | SendFailed
    ) -> None:
        """The row's final status, for this attempt only: a row the reaper handed on, or
        another attempt settled differently, refuses (`Conflict`: nothing is written); one
        settled the same way accepts it, and the follow-up turn's id stops a second turn."""
        if isinstance(result, SendCompleted):
            await tx.outbox.mark_completed(row.outbox_id, row.attempt_count)
        else:
            await tx.outbox.mark_failed(row.outbox_id, result.code, None, row.attempt_count)

    async def _follow_up(
        self,
        row: OutboxEntry,
        purpose: str,
        record: Callable[[Stores, TurnState | None], Awaitable[bool]],
        *,
        load: CaseKey | None = None,
        finish: bool = False,
    ) -> bool:
        """Run `record` in one transaction, with the row's follow-up turn begun (None when the
        row names no conversation to tell), under the conversation's lock and after finishing
        the conversation's unfinished previous turn; with `finish`, then finish the turn it
        started (run its command by key, compose, deliver). False when another worker had
        recorded the row (this transaction wrote nothing)."""
        where = await self._conversation_of(row)
        if where is None:  # only the row moves: one write needs no transaction of its own
            return await self._recorded(record, None)
        account_id, conversation_id, locale = where
        turn_id = follow_up_turn_id(account_id, row.outbox_id, purpose)
        cause = f"outbox:{row.outbox_id}:{purpose}"
        kernel = self.kernel
        async with kernel.lock(account_id, conversation_id):
            for _ in range(2):
                t = server_turn(kernel, account_id, conversation_id, turn_id, cause, locale)
                if load is not None:
                    await t.cases.load(load)
                try:
                    recorded = await self._recorded(record, t)
                    break
                except PreviousTurnUnfinished as previous:
                    await kernel.recovery().turn(account_id, previous.turn_id)
            else:
                raise PreviousTurnUnfinished(turn_id)
            # Only a turn that was written is finished: an answer the case records nothing of
            # settles the row alone.
            if recorded and finish and t.recorder.record is not None:
                await kernel.recovery().turn(account_id, turn_id, counted=False)
        return recorded

    async def _recorded(
        self, record: Callable[[Stores, TurnState | None], Awaitable[bool]], t: TurnState | None
    ) -> bool:
        """`record` in one transaction (the follow-up turn's, when there is one). False when
        another worker recorded the row first; `_Unrecordable` when the answer can never be
        recorded; a store that is unavailable or timed out raises as it is (a later attempt
        may succeed)."""
        try:
            if t is None:
                return await record(self.stores, None)
            async with t.events.transaction(self.stores) as tx:
                return await record(tx, t)
        except PreviousTurnUnfinished:
            raise
        except InvalidRecord as refused:
            raise _Unrecordable(refused.code) from refused
        except Conflict:
            # The row moved, or the follow-up turn exists, between the reads and the writes:
            # another worker recorded it.
            return False
        except StoreError:
            raise
        except Exception as broken:  # a value with no canonical form, a workflow that raised
            raise _Unrecordable(type(broken).__name__) from broken

    async def _conversation_of(self, row: OutboxEntry) -> tuple[str, str, str] | None:
        """The account, conversation and locale of the turn that enqueued the row; None for a
        row that names no conversation (`conversation_id: None`, enqueued outside a turn). A
        row from before rows named it is looked up through its command's journal entry."""
        body = row.payload
        account_id = str(body.get("account_id", ""))
        if "conversation_id" in body:
            conversation_id, locale = body["conversation_id"], body.get("locale")
            if isinstance(conversation_id, str):
                return account_id, conversation_id, locale if isinstance(locale, str) else "en"
            return None
        try:
            entry = await self.stores.journal.get(account_id, row.command_id)
            user = await self.stores.conversations.get_user_turn(account_id, entry.turn_id)
        except NotFound:
            return None
        return account_id, user.conversation_id, user.input.locale


def _answer_origin(request: OutboxRequest) -> ExternalCallback:
    """The origin of the command that records an answer: a verified callback on the row."""
    return ExternalCallback(callback_id=request.outbox_id, signature_verified=True)


@dataclass(frozen=True)
class _Recording:
    """The command a workflow records an answer with, its policy, and whether the answer's
    origin (a verified callback on the row) may run it."""

    command: CompiledCommand
    policy: CommandPolicy
    origin: ExternalCallback
    allowed: bool


def _recording(
    workflow: Workflow, request: OutboxRequest, result: SendCompleted | SendFailed
) -> _Recording | None:
    """How the workflow records `result` on the request's case: None when it records nothing
    (`external_answer` returns None). A workflow that raises raises here."""
    command = workflow.external_answer(request, result)
    if command is None:
        return None
    origin = _answer_origin(request)
    policy = workflow.policy(command.command_type)
    return _Recording(command, policy, origin, origin_satisfies(origin, policy))


def _writes_turn(result: SendCompleted | SendFailed, recording: _Recording | None) -> bool:
    """Whether a final answer writes the row's `answer` turn: a failed one always (the user is
    told), a completed one only when its case records it with a command the answer's origin
    may run (else the row settles alone). `_answer` writes by it and `answer_turn` promises
    by it."""
    return not isinstance(result, SendCompleted) or (recording is not None and recording.allowed)


def _forget(task: asyncio.Future[Any]) -> None:
    """A sender's call abandoned at its timeout ended (or will): its outcome is not read."""
    if not task.cancelled():
        task.exception()


class _Unrecordable(Exception):
    """An answer that cannot be recorded however often it is tried: a store refused a value in
    it (`InvalidRecord`), it has no canonical form, or the workflow's `external_answer` raised."""


async def _told(tx: Stores, t: TurnState) -> bool:
    """Whether this follow-up turn was written before (an earlier attempt's)."""
    try:
        await tx.conversations.get_user_turn(t.ctx.account_id, t.ctx.turn_id)
    except NotFound:
        return False
    return True
