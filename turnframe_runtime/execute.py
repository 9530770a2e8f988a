"""Steps M and N: execute the turn's batches and write ONE all-or-nothing commit bundle.

- Every command of the turn is admitted to the journal before the first effect, so recovery finds
  the whole plan by key whatever batch a crash interrupts.
- One batch per case, through the domain's executor (expected revision, idempotency key). A typed
  refusal, conflict or failure means nothing was applied; a timeout or any other error is an
  unknown outcome, never a failure and never retried blindly.
- The bundle carries journal completions, events, card resolutions, invalidations, outbox rows,
  the replay record and the phase marker. Receipts may cite only events read back from the
  committed ledger afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from turnframe_core import codes
from turnframe_core.cases import CaseKey, CaseRef
from turnframe_core.commands import CommandBatch, ExternalSaga, PerCase, scope_key
from turnframe_core.derive import derive_batch_id, derive_outbox_id
from turnframe_core.events import DomainEvent
from turnframe_core.interactions import InteractionStatus
from turnframe_core.replay import (
    CommandOutcome,
    CommittedOutcome,
    FailedOutcome,
    OutcomeUnknown,
    RejectedOutcome,
    RevisionConflictOutcome,
    TurnPhase,
)
from turnframe_core.workflow import DomainRefusal
from turnframe_runtime.card_answer import ClaimedCard
from turnframe_runtime.config import RuntimeConfig
from turnframe_runtime.context import (
    NOTHING,
    AuditTrail,
    Executed,
    Noticed,
    Teller,
    TurnContext,
    noticed,
)
from turnframe_runtime.errors import TurnInProgress
from turnframe_runtime.ports import (
    ExecutionFailed,
    ExecutionRejected,
    ExecutionResult,
    ExecutionTimeout,
    RevisionConflict,
    WorkflowExecutor,
)
from turnframe_runtime.record import Recorder
from turnframe_runtime.reduce import PlannedCommand, group_by_case
from turnframe_store.bundle import Stores
from turnframe_store.errors import NotFound, StoreError
from turnframe_store.records import (
    CaseInvalidation,
    CommitBundle,
    Fresh,
    InteractionFinish,
    JournalCompletion,
    JournalEntry,
    JournalStatus,
    OutboxEntry,
    UserTurnRecord,
)

__all__ = ["Committed", "Execution", "Ran", "tell_outcome"]


@dataclass(frozen=True)
class Committed:
    """N's result: what ran, as the commit judged it (a replay citing another command's events
    is a failure), the committed events read back from the ledger by id (empty when nothing
    committed), the outbox rows the bundle enqueued, and what the commit could not confirm."""

    executed: tuple[Executed, ...] = ()
    readback: Mapping[str, DomainEvent] = field(default_factory=dict)
    outbox_ids: tuple[str, ...] = ()
    noticed: Noticed = NOTHING


@dataclass(frozen=True)
class Ran:
    """M's result: what each command came to, in execution order, and what the batches that
    did not run say."""

    executed: tuple[Executed, ...] = ()
    noticed: Noticed = NOTHING


@dataclass
class Execution:
    """Runs one turn's commands and commits what they did, at the turn's durable points."""

    executor: WorkflowExecutor
    config: RuntimeConfig
    turn: TurnContext
    tell: Teller
    audit: AuditTrail
    recorder: Recorder
    #: a result the executor replays (it took effect before) invalidates the case's cards; not
    #: so for recovery, where the case may have moved on since (its cards are newer)
    replays_invalidate: bool = True

    async def admit(
        self,
        stores: Stores,
        card: ClaimedCard | None,
        ready: Sequence[PlannedCommand],
        user_turn: UserTurnRecord | None = None,
    ) -> list[PlannedCommand]:
        """M, before any effect, in one bundle: every command of the turn journaled (the card's
        own were journaled with it) and marked executing, with the phase and the replay record
        (and, for a click-only turn, the user turn itself), so recovery finds the whole plan by
        key whatever batch a crash interrupts. Returns the commands to run, the card's first."""
        commands = [*(card.commands if card else ()), *ready]
        for command in ready:
            self.audit.decided(command.envelope, command.policy, True)
        turn = self.turn
        # `executing` once anything may take effect (a command, or a card now resolving), so
        # recovery finishes the turn rather than restarting it.
        resolving = card is not None and card.resolves
        phase = TurnPhase.EXECUTING if commands or resolving else TurnPhase.REDUCED
        record = self.recorder.at(phase)
        stream = self.recorder.events
        if user_turn is not None:  # a click-only turn is accepted in this bundle
            stream.phase(TurnPhase.RECEIVED)
        stream.phase(phase)
        if commands:
            stream.step("execute")
        bundle = CommitBundle(
            account_id=turn.account_id,
            conversation_id=turn.conversation_id,
            turn_id=turn.turn_id,
            user_turn=user_turn,
            journal_admissions=tuple(
                JournalEntry.from_envelope(c.envelope, now=turn.now)
                for c in commands
                if c.envelope.turn_id == turn.turn_id
            ),
            journal_starts=tuple(c.envelope.command_id for c in commands),
            replay=record,
            phase=phase,
            stream_events=stream.take(),
        )
        result = await stores.commits.commit(bundle)
        if not all(isinstance(a, Fresh) for a in result.admissions):
            raise TurnInProgress("a command of this turn was admitted before")
        self.recorder.record = record
        return commands

    async def run(self, commands: Sequence[PlannedCommand]) -> Ran:
        """M: one batch per case, in plan order, through the domain's executor; what each
        command came to, in execution order."""
        executed: list[Executed] = []
        said = NOTHING
        for case_key, batch in group_by_case(commands).items():
            ran, told = await self._run_batch(case_key, batch)
            executed.extend(ran)
            said += told
        return Ran(tuple(executed), said)

    async def _run_batch(
        self, case_key: CaseKey, commands: list[PlannedCommand]
    ) -> tuple[list[Executed], Noticed]:
        external = next((c.policy.atomicity for c in commands if c.is_external), None)
        scope = external if external is not None else PerCase()
        batch = CommandBatch(
            batch_id=derive_batch_id(
                self.turn.account_id,
                self.turn.turn_id,
                case_key.workflow,
                case_key.case_id,
                scope_key(scope),
            ),
            scope=scope,
            envelopes=tuple(c.envelope for c in commands),
        )

        outcome = await self._attempt(batch, case_key, commands)
        if isinstance(outcome, ExecutionResult):
            return self._committed(commands, outcome), NOTHING
        # Nothing of the batch is cited: every command shares its outcome and one notice.
        said = tell_outcome(self.tell, commands[0].envelope.case_ref, outcome)
        if isinstance(outcome, OutcomeUnknown):
            return [
                Executed(c, outcome.model_copy(update={"attempt_id": c.envelope.command_id}))
                for c in commands
            ], said
        return [Executed(c, outcome) for c in commands], said

    async def _attempt(
        self, batch: CommandBatch, case_key: CaseKey, commands: Sequence[PlannedCommand]
    ) -> ExecutionResult | CommandOutcome:
        """The executor's result for the batch, or the outcome it comes to instead."""
        try:
            result: ExecutionResult = await self.executor.execute(batch)
        except RevisionConflict as conflict:
            return RevisionConflictOutcome(current_revision=conflict.current_revision)
        except ExecutionRejected as rejected:
            return RejectedOutcome(code=rejected.rejection_code, explanation=rejected.explanation)
        except ExecutionTimeout:  # the executor says it sent the request
            return OutcomeUnknown(attempt_id=batch.batch_id, reason="execution_timeout")
        except ExecutionFailed as failed:
            return FailedOutcome(code=codes.code_of(failed, codes.EXECUTION_FAILED))
        except Exception as error:  # it may have landed: not a failure, and nothing was "sent"
            return OutcomeUnknown(
                attempt_id=batch.batch_id, reason="executor_error", error=_described(error)
            )
        if not self._trusted(case_key, commands, result):
            # Failed as far as this turn goes (nothing of it is cited), but its effect may have
            # landed: the user is not told that nothing changed.
            return FailedOutcome(code=codes.EXECUTION_UNTRUSTED_RESULT)
        return result

    @staticmethod
    def _committed(commands: Sequence[PlannedCommand], result: ExecutionResult) -> list[Executed]:
        executed = []
        for command in commands:
            own = tuple(e for e in result.events if e.command_id == command.envelope.command_id)
            outcome = CommittedOutcome(
                new_revision=result.new_revision, event_ids=tuple(e.event_id for e in own)
            )
            executed.append(Executed(command, outcome, own, replayed=result.replayed))
        return executed

    def _trusted(
        self, case_key: CaseKey, commands: Sequence[PlannedCommand], result: ExecutionResult
    ) -> bool:
        """A result may report only events of this account, this case and these commands."""
        ours = {c.envelope.command_id for c in commands}
        return all(
            e.account_id == self.turn.account_id
            and e.workflow == case_key.workflow
            and e.case_id == case_key.case_id
            and e.command_id in ours
            for e in result.events
        )

    def _finish(self, card: ClaimedCard, executed: Sequence[Executed]) -> InteractionFinish | None:
        """How the commit settles a card this turn claimed. A card whose command has an unknown
        outcome stays `resolving` (it holds the slot; a second click is a duplicate) until
        reconciliation settles the command."""
        own = {c.envelope.command_id for c in card.commands}
        runs = [e for e in executed if e.planned.envelope.command_id in own]
        if not card.resolves or any(isinstance(e.outcome, OutcomeUnknown) for e in runs):
            return None
        committed = [e for e in runs if isinstance(e.outcome, CommittedOutcome)]
        if not runs or committed:
            status = InteractionStatus.RESOLVED
        elif self.config.restore_card_after_failed_command:
            status = InteractionStatus.ACTIVE
        else:
            status = InteractionStatus.FAILED
        return InteractionFinish(
            interaction_id=card.card.interaction_id,
            status=status,
            option_id=card.option_id,
            event_ids=tuple(ev.event_id for e in committed for ev in e.events),
        )

    def _distrust_foreign_replays(
        self, executed: Sequence[Executed], ledger: dict[str, DomainEvent]
    ) -> tuple[tuple[Executed, ...], Noticed]:
        """A replayed result must cite events its own commands produced: an event the ledger
        holds under another command or case makes the whole batch's result untrusted, and each
        of its commands a failure (nothing of it is appended or cited)."""
        replays = [e for e in executed if e.replayed]
        untrusted = {
            e.planned.envelope.case_ref.key
            for e in replays
            for ev in e.events
            if ev.event_id in ledger
            and (
                ledger[ev.event_id].command_id != ev.command_id
                or ledger[ev.event_id].case_key != ev.case_key
                or ledger[ev.event_id].account_id != ev.account_id
            )
        }
        if not untrusted:
            return tuple(executed), NOTHING
        judged = []
        for e in executed:
            if e.replayed and e.planned.envelope.case_ref.key in untrusted:
                for ev in e.events:
                    ledger.pop(ev.event_id, None)
                e = replace(
                    e, outcome=FailedOutcome(code=codes.EXECUTION_UNTRUSTED_RESULT), events=()
                )
            judged.append(e)
        return tuple(judged), noticed(codes.NOTICE_RESULT_UNCONFIRMED)

    def _outbox(self, ran: Sequence[Executed]) -> list[OutboxEntry]:
        rows: list[OutboxEntry] = []
        for executed in ran:
            atomicity = executed.planned.policy.atomicity
            if not (
                isinstance(executed.outcome, CommittedOutcome)
                and isinstance(atomicity, ExternalSaga)
            ):
                continue
            envelope = executed.planned.envelope
            rows.append(
                OutboxEntry(
                    outbox_id=derive_outbox_id(envelope.account_id, envelope.command_id),
                    command_id=envelope.command_id,
                    destination=atomicity.saga,
                    payload={
                        "account_id": envelope.account_id,
                        # where the answer's follow-up turn goes, and in which language
                        "conversation_id": self.turn.conversation_id,
                        "locale": self.turn.locale,
                        "case_ref": envelope.case_ref.model_dump(mode="json"),
                        "command_type": envelope.command_type,
                        "payload": envelope.payload,
                    },
                    idempotency_key=envelope.idempotency_key,
                    created_at=self.turn.now,
                )
            )
        return rows

    async def commit(
        self,
        stores: Stores,
        card: ClaimedCard | None,
        executed: Sequence[Executed],
        *,
        record: bool = True,
    ) -> Committed:
        """N: ONE all-or-nothing bundle of what the turn did (`executed`, as `run` returned
        it). Without `record`, the replay record and the phase marker are left to the delivery
        in the same transaction."""
        turn = self.turn
        # An executor that saw these keys before replayed them: events the ledger holds already
        # are not appended again, and must be this command's own.
        replayed = [ev.event_id for e in executed if e.replayed for ev in e.events]
        ledger: dict[str, DomainEvent] = {}
        said = NOTHING
        if replayed:
            stored = await stores.events.get_by_ids(turn.account_id, replayed)
            ledger = {ev.event_id: ev for ev in stored}
            executed, said = self._distrust_foreign_replays(executed, ledger)
        executed = tuple(executed)
        # What the record says ran is what this commit judged.
        self.audit.executed = list(executed)
        completions = [
            JournalCompletion(command_id=e.planned.envelope.command_id, outcome=e.outcome)
            for e in executed
        ]
        declined = FailedOutcome(code=codes.EXECUTION_DECLINED)
        completions += [
            JournalCompletion(command_id=entry.command_id, outcome=declined)
            for entry in (card.declines if card else ())
        ]
        finish = self._finish(card, executed) if card is not None else None
        if not (completions or finish):
            return Committed(executed)
        invalidations: dict[CaseKey, int] = {}
        for e in executed:
            if isinstance(e.outcome, CommittedOutcome) and (
                self.replays_invalidate or not e.replayed
            ):
                invalidations[e.planned.envelope.case_ref.key] = e.outcome.new_revision
        outbox = self._outbox(executed)
        outbox_ids = tuple(row.outbox_id for row in outbox)
        self.audit.outbox_ids.extend(outbox_ids)
        replay = self.recorder.at(TurnPhase.COMMITTED) if record else None
        self.recorder.events.phase(TurnPhase.COMMITTED)
        self.recorder.events.step("compose")
        result = await stores.commits.commit(
            CommitBundle(
                account_id=turn.account_id,
                conversation_id=turn.conversation_id,
                turn_id=turn.turn_id,
                journal_completions=tuple(completions),
                events=tuple(ev for e in executed for ev in e.events if ev.event_id not in ledger),
                interaction_finishes=(finish,) if finish else (),
                invalidations=tuple(
                    CaseInvalidation(workflow=k.workflow, case_id=k.case_id, current_revision=r)
                    for k, r in invalidations.items()
                ),
                outbox=tuple(outbox),
                replay=replay,
                phase=TurnPhase.COMMITTED if record else None,
                # Without the record, the delivery follows in this transaction and logs the
                # stream's events with its own bundle (one append, not two).
                stream_events=self.recorder.events.take() if record else (),
            )
        )
        if replay is not None:
            self.recorder.record = replay
        await self._settle_invalidated(stores, result.invalidated)
        # Receipts cite only what the ledger returns: the committed events, read back (decision
        # 0006: inside the committing transaction, used only once its COMMIT succeeded).
        committed_ids = [ev.event_id for e in executed for ev in e.events]
        if not committed_ids:
            return Committed(executed, {}, outbox_ids, said)
        # The ledger's own rows: those the bundle's inserts returned, and those a replayed
        # execution found stored already.
        readback = {**ledger, **{ev.event_id: ev for ev in result.events}}
        if len(readback) != len(set(committed_ids)):
            said += noticed(codes.NOTICE_VERIFICATION_IN_PROGRESS)  # committed, not yet readable
        return Committed(executed, readback, outbox_ids, said)

    async def _settle_invalidated(self, stores: Stores, invalidated: Sequence[str]) -> None:
        """Commands journaled with a card the commit invalidated can never be confirmed: settle
        them as failed so nothing waits on them (best effort, each card behind a savepoint;
        recovery never resumes them)."""
        for interaction_id in invalidated:
            with contextlib.suppress(StoreError):
                async with stores.savepoint():
                    await self._settle_card(stores, interaction_id)

    async def _settle_card(self, stores: Stores, interaction_id: str) -> None:
        account_id = self.turn.account_id
        card = await stores.interactions.get(account_id, interaction_id)
        invalidated = FailedOutcome(code=codes.EXECUTION_CARD_INVALIDATED)
        for command_id in card.payload.confirmed_command_ids():
            try:
                entry = await stores.journal.get(account_id, command_id)
            except NotFound:  # never journaled: nothing waits on it
                continue
            if entry.status is JournalStatus.AWAITING_CONFIRMATION:
                await stores.journal.complete(account_id, command_id, invalidated)


def tell_outcome(tell: Teller, case_ref: CaseRef, outcome: CommandOutcome) -> Noticed:
    """The notice (or, in the domain's own words, the refusal) a command's outcome shows."""
    if isinstance(outcome, RevisionConflictOutcome):
        return noticed(codes.NOTICE_REVISION_CONFLICT)
    if isinstance(outcome, RejectedOutcome):
        explanation = outcome.explanation.strip()
        if explanation:  # a refusal the narrator may state (ActRefused)
            return tell.refuse(case_ref, DomainRefusal(code=outcome.code, explanation=explanation))
        return noticed(codes.NOTICE_COMMAND_FAILED)  # nothing of the domain's own to say
    if isinstance(outcome, OutcomeUnknown):
        timed_out = outcome.reason == "execution_timeout"
        return noticed(
            codes.NOTICE_VERIFICATION_IN_PROGRESS if timed_out else codes.NOTICE_OUTCOME_UNCERTAIN
        )
    if isinstance(outcome, FailedOutcome):
        if outcome.code == codes.EXECUTION_UNTRUSTED_RESULT:
            return noticed(codes.NOTICE_RESULT_UNCONFIRMED)
        if outcome.code == codes.EXECUTION_DECLINED:
            return noticed(codes.NOTICE_INSTRUCTION_DECLINED)
        if outcome.code != codes.EXECUTION_CARD_INVALIDATED:
            return noticed(codes.NOTICE_COMMAND_FAILED)
    return NOTHING


def _described(error: BaseException) -> str:
    """`Type: message` of an executor's exception, fit for the record whatever it holds: at most
    300 characters, no NUL, no lone surrogate; a message that cannot be read is said to be so."""
    name = type(error).__name__
    try:
        text = f"{name}: {str(error)!s}".replace("\x00", "\\x00")
        return text.encode("utf-8", "backslashreplace").decode("utf-8")[:300]
    except Exception:  # its __str__ (or what that returned) raised
        return f"{name}: <the message could not be read>"[:300]
