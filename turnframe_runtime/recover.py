"""Recovery: finish a turn a crash interrupted, from its durable points (DESIGN §9).

For a turn whose marker is not terminal, in this order:
1. a command whose outcome is unknown asks the executor (`outcome(idempotency_key)`, when the
   executor offers it): applied settles it committed, never applied settles it failed, no answer
   leaves it unknown;
2. a command journaled and never settled runs again by its idempotency key, with the journaled
   envelope (never re-planned, never re-interpreted): an executor that applied it returns the
   original result;
3. what that settled commits in one bundle, with the card the turn claimed;
4. the reply is composed again from the ledger with server copy only (recovery resubmits no model
   request): the same receipts, notices and cards the turn would have shown;
5. a turn with nothing journaled ends `interrupted` with a notice, and a card it claimed is
   active again.

Recovery takes the conversation's lock, so it never runs beside a turn still in flight.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from turnframe_core import codes
from turnframe_core.cases import CaseKey
from turnframe_core.commands import CommandEnvelope
from turnframe_core.events import DomainEvent
from turnframe_core.ids import derive_id
from turnframe_core.interactions import Interaction, InteractionStatus
from turnframe_core.replay import (
    CommittedOutcome,
    FailedOutcome,
    ReplayRecord,
    TurnPhase,
)
from turnframe_core.turn import AssistantTurn
from turnframe_core.understanding import Understanding
from turnframe_runtime import observe
from turnframe_runtime.card_answer import ClaimedCard
from turnframe_runtime.cards import CardFactory
from turnframe_runtime.cases import CaseBook, workflow_for
from turnframe_runtime.compose import Composer, TurnResult
from turnframe_runtime.context import (
    NOTHING,
    AuditTrail,
    Executed,
    Noticed,
    Teller,
    TurnContext,
    merge_notices,
    noticed,
)
from turnframe_runtime.copy import RecordingCopy
from turnframe_runtime.execute import Execution, tell_outcome
from turnframe_runtime.follow_up import FollowUp
from turnframe_runtime.ports import ExecutionResult
from turnframe_runtime.record import Recorder, TurnFacts
from turnframe_runtime.reduce import Plan, PlannedCommand
from turnframe_runtime.server_turn import server_turn, tell
from turnframe_runtime.state import TurnState
from turnframe_runtime.stream import TurnEvents
from turnframe_store.errors import NotFound, StoreError
from turnframe_store.records import JournalEntry, JournalStatus

if TYPE_CHECKING:
    from turnframe_runtime.kernel import Kernel

__all__ = ["RecoveredTurn", "Recovery", "RecoveryOutcome", "RecoveryReport"]

_LOG = logging.getLogger(__name__)

_RUN_AGAIN = (JournalStatus.PENDING, JournalStatus.EXECUTING)


class RecoveryOutcome(StrEnum):
    """What recovery did with one turn."""

    #: the turn had ended already; nothing was done
    FINISHED = "finished"
    #: commands ran again by key, or unknown outcomes were settled, then the reply was composed
    RESUMED = "resumed"
    #: everything had settled: the reply was composed again from the ledger
    REGENERATED = "regenerated"
    #: the reply was stored; commands whose outcome was unknown were settled by asking the
    #: executor (those it could not tell about stay unknown, and the turn stays unfinished)
    RECONCILED = "reconciled"
    #: nothing had run: the turn ended `interrupted` with a notice
    INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class RecoveredTurn:
    account_id: str
    turn_id: str
    outcome: RecoveryOutcome
    #: commands of the turn whose outcome is still unknown (the executor could not tell)
    unknown: int = 0
    #: turns of the conversation finished first, so this turn's follow-up went after them
    earlier: tuple[RecoveredTurn, ...] = ()


@dataclass(frozen=True)
class RecoveryReport:
    """What one sweep did, turn by turn; `failed` names turns recovery could not finish yet
    (a store or executor failure: the next sweep tries again)."""

    turns: tuple[RecoveredTurn, ...] = ()
    failed: tuple[tuple[str, str, str], ...] = ()

    def count(self, outcome: RecoveryOutcome) -> int:
        return sum(1 for turn in self.turns if turn.outcome is outcome)

    def __iter__(self) -> Iterator[RecoveredTurn]:
        return iter(self.turns)

    def __len__(self) -> int:
        return len(self.turns)


@dataclass(frozen=True)
class Recovery:
    """Finishes interrupted turns with the kernel's collaborators."""

    kernel: Kernel

    async def sweep(
        self, *, limit: int = 1_000, older_than_ms: int | None = None
    ) -> RecoveryReport:
        """Finish every unfinished turn (at most `limit`; with `older_than_ms`, only turns whose
        marker moved longer ago), each under its conversation's lock. A turn that cannot be
        finished now is listed in `failed` for the next sweep; the others go on."""
        markers = await self.kernel.stores.conversations.list_unfinished_turns(limit)
        cutoff = None if older_than_ms is None else self.kernel.clock() - older_than_ms
        turns: dict[tuple[str, str], RecoveredTurn] = {}
        failed: list[tuple[str, str, str]] = []
        for marker in markers:
            key = (marker.account_id, marker.turn_id)
            if key in turns or (cutoff is not None and marker.updated_at > cutoff):
                continue  # (a turn another one finished first is reported as it ended)
            try:
                recovered = await self.locked(marker.account_id, marker.turn_id)
            except Exception as failure:  # this turn waits for the next sweep; the others go on
                failed.append((marker.account_id, marker.turn_id, codes.code_of(failure)))
                continue
            for turn in (*recovered.earlier, recovered):
                turns[(turn.account_id, turn.turn_id)] = turn
        return RecoveryReport(tuple(turns.values()), tuple(failed))

    async def locked(self, account_id: str, turn_id: str) -> RecoveredTurn:
        """Finish one turn under its conversation's lock. `NotFound` for a turn this account
        does not have."""
        user = await self.kernel.stores.conversations.get_user_turn(account_id, turn_id)
        async with self.kernel.lock(account_id, user.conversation_id):
            return await self.turn(account_id, turn_id)

    async def turn(self, account_id: str, turn_id: str, *, counted: bool = True) -> RecoveredTurn:
        """Finish one turn (the caller holds its conversation's lock). `counted` False: not a
        recovery but the ordinary finish of a turn written to be finished this way (an outbox
        answer's follow-up turn), which the `recovery.*` counters leave out."""
        with observe.span("recovery.turn", turn_id=turn_id):
            recovered = await self._turn(account_id, turn_id)
            if counted and recovered.outcome is not RecoveryOutcome.FINISHED:
                observe.count(f"recovery.{recovered.outcome.value}")
                observe.event(_LOG, f"recovery.{recovered.outcome.value}", turn_id=turn_id,
                              unknown=recovered.unknown)  # fmt: skip
            return recovered

    async def _turn(self, account_id: str, turn_id: str) -> RecoveredTurn:
        conversations = self.kernel.stores.conversations
        marker = await conversations.get_phase(account_id, turn_id)
        if marker.phase.is_terminal:
            return RecoveredTurn(account_id, turn_id, RecoveryOutcome.FINISHED)
        user = await conversations.get_user_turn(account_id, turn_id)
        ctx = TurnContext(user.input, turn_id, user.received_at)
        record = await self.kernel.stores.replay.get(account_id, turn_id)
        audit = _carried_on(TurnFacts.of(record))
        tell = Teller(RecordingCopy(self.kernel.copy, audit.rendered), ctx.locale)
        stream = TurnEvents(
            account_id,
            turn_id,
            self.kernel.clock,
            hub=self.kernel.hub,
            fresh=False,
            only_if_begun=not self.kernel.config.stream_every_turn,
        )
        recorder = Recorder(audit, self.kernel.clock, stream)
        recorder.resume(record)
        card = await self._claimed_card(ctx, record)
        entries = await self._started(ctx, record)
        try:
            await conversations.get_assistant_turn(account_id, turn_id)
            replied = True
        except NotFound:
            replied = False
        if not entries and not replied:
            return await self._interrupt(ctx, card, record, audit, recorder)
        planned = {e.command_id: self._planned(e) for e in entries}
        execution = Execution(
            self.kernel.executor,
            self.kernel.config,
            ctx,
            tell,
            audit,
            recorder,
            replays_invalidate=False,
        )
        reconciled = await self._reconcile(ctx, entries, planned)
        claimed = self._claim(ctx, card, planned)
        if replied:
            return await self._settle_after_reply(
                ctx, record, entries, claimed, execution, reconciled
            )
        ran = await execution.run(
            [planned[e.command_id] for e in entries if e.status in _RUN_AGAIN]
        )
        executed = (*reconciled, *ran.executed)
        resumed = bool(executed)
        if claimed is not None and _still_unknown(claimed, entries, executed):
            claimed = None  # a command of the card may still take effect: it stays resolving
        if resumed:
            async with stream.transaction(self.kernel.stores) as tx:
                await execution.commit(tx, claimed, executed)
        # Everything the turn ran, as the journal now holds it: the reply cites all of it, and
        # says only what that came to (what running it said along the way is not the reply's).
        settled = [await self.kernel.stores.journal.get(account_id, e.command_id) for e in entries]
        unknown = sum(1 for e in settled if e.status is JournalStatus.OUTCOME_UNKNOWN)
        events = await self._events(account_id, settled)
        final = tuple(
            Executed(planned[e.command_id], e.outcome, _own(events, e.command_id))
            for e in settled
            if e.outcome is not None
        )
        audit.executed = list(final)
        said = merge_notices(
            *(tell_outcome(tell, done.planned.envelope.case_ref, done.outcome) for done in final)
        )
        assistant = await self._compose(
            ctx, tell, said, audit, record, events, settled, card, final
        )
        async with stream.transaction(self.kernel.stores) as tx:
            await recorder.deliver(tx, assistant, settled=not unknown)
        outcome = RecoveryOutcome.RESUMED if resumed else RecoveryOutcome.REGENERATED
        return RecoveredTurn(account_id, turn_id, outcome, unknown)

    async def _settle_after_reply(
        self,
        ctx: TurnContext,
        record: ReplayRecord,
        entries: Sequence[JournalEntry],
        claimed: ClaimedCard | None,
        execution: Execution,
        reconciled: Sequence[Executed],
    ) -> RecoveredTurn:
        """A turn whose reply is stored (and final: later records chain to its record) had
        outcomes nobody could tell. What reconciliation settled now commits with a server-written
        follow-up turn that tells the conversation of it (its receipts cite the events, its
        notices what failed), in one transaction: an event never commits without the turn that
        says so. The turn is finished once no outcome is unknown."""
        settled_now = list(reconciled)
        told = {e.planned.envelope.command_id for e in settled_now}
        unknown = len(_unknown(entries, settled_now))
        if claimed is not None and _still_unknown(claimed, entries, settled_now):
            claimed = None  # a command of the card may still take effect: it stays resolving
        follow_up = None
        earlier: tuple[RecoveredTurn, ...] = ()
        if settled_now:
            # The follow-up turn goes last in the conversation, after any turn a crash left
            # unfinished there (finished first: the caller holds the conversation's lock).
            last = await self.kernel.stores.replay.last_for_conversation(
                ctx.account_id, ctx.conversation_id
            )
            if last is not None and not last.phase.is_terminal and last.turn_id != ctx.turn_id:
                earlier = (await self.turn(ctx.account_id, last.turn_id),)
            follow_up = self._follow_up_turn(ctx, record, told)
        stream = follow_up.events if follow_up is not None else None
        async with (
            stream.transaction(self.kernel.stores)
            if stream is not None
            else self.kernel.stores.transaction()
        ) as tx:
            if follow_up is not None:
                committed = await execution.commit(tx, claimed, settled_now, record=False)
                await tell(
                    self.kernel,
                    tx,
                    follow_up,
                    settled=committed.executed,  # as the commit judged them
                    readback=committed.readback,
                    outbox_ids=committed.outbox_ids,
                    judged=committed.noticed,
                )
            if not unknown:
                await tx.conversations.set_phase(ctx.account_id, ctx.turn_id, TurnPhase.DELIVERED)
        return RecoveredTurn(
            ctx.account_id, ctx.turn_id, RecoveryOutcome.RECONCILED, unknown, earlier
        )

    def _follow_up_turn(self, ctx: TurnContext, record: ReplayRecord, told: set[str]) -> TurnState:
        turn_id = settled_turn_id(ctx.account_id, ctx.turn_id, sorted(told))
        # What authorized each command is what the turn that ran it decided.
        decided = [d for d in record.policy_decisions if d.command_id in told]
        cause = f"reconciled:{ctx.turn_id}"
        return server_turn(
            self.kernel, ctx.account_id, ctx.conversation_id, turn_id, cause, ctx.locale, decided
        )

    # --- what the turn had done --------------------------------------------------------------

    async def _claimed_card(self, ctx: TurnContext, record: ReplayRecord) -> Interaction | None:
        """The card this turn claimed (its record decided a command the card authorizes: a turn
        that lost the card to another answer decided none), whatever its status is now."""
        response = ctx.input.interaction_response
        if response is None or not _claimed_by(record, response.interaction_id):
            return None
        try:
            return await self.kernel.stores.interactions.get(
                ctx.account_id, response.interaction_id
            )
        except NotFound:
            return None

    async def _started(self, ctx: TurnContext, record: ReplayRecord) -> list[JournalEntry]:
        """The commands this turn started, from what it wrote: every command its record allowed
        (the start bundle records the decision with the journal's move to `executing`, so a
        card's commands journaled by the turn that raised it are found too, whatever the card's
        status is now), then any other entry journaled under this turn's id. A command a card
        authorizes counts only when this turn won that card (the turn that raised a card, or
        one that lost it, started none of its commands); any other only when this turn
        journaled it."""
        response = ctx.input.interaction_response
        won = (
            response.interaction_id
            if response is not None and _claimed_by(record, response.interaction_id)
            else None
        )
        found: dict[str, JournalEntry] = {}
        for decision in record.policy_decisions:
            if not decision.allowed or decision.command_id in found:
                continue
            try:
                found[decision.command_id] = await self.kernel.stores.journal.get(
                    ctx.account_id, decision.command_id
                )
            except NotFound:
                continue
        own = await self.kernel.stores.journal.for_turn(ctx.account_id, ctx.turn_id)
        return _ran(e for e in (*found.values(), *own) if _started_by(e, ctx.turn_id, won))

    @staticmethod
    def _claim(
        ctx: TurnContext, card: Interaction | None, planned: Mapping[str, PlannedCommand]
    ) -> ClaimedCard | None:
        """The card the turn claimed, while it is resolving: the commit finishes it."""
        response = ctx.input.interaction_response
        if card is None or response is None or card.status is not InteractionStatus.RESOLVING:
            return None
        return ClaimedCard(
            card=card,
            option_id=response.option_id,
            resolves=True,
            commands=tuple(
                p
                for p in planned.values()
                if getattr(p.envelope.origin, "interaction_id", None) == card.interaction_id
            ),
        )

    def _planned(self, entry: JournalEntry) -> PlannedCommand:
        envelope = CommandEnvelope(
            command_id=entry.command_id,
            turn_id=entry.turn_id,
            account_id=entry.account_id,
            case_ref=entry.case_ref,
            idempotency_key=entry.idempotency_key,
            origin=entry.origin,
            command_type=entry.command_type,
            payload=entry.payload,
        )
        workflow = workflow_for(self.kernel.workflows, entry.case_ref.workflow)
        return PlannedCommand("recovered", envelope, workflow.policy(entry.command_type))

    async def _reconcile(
        self,
        ctx: TurnContext,
        entries: Sequence[JournalEntry],
        planned: Mapping[str, PlannedCommand],
    ) -> list[Executed]:
        """Ask the executor what became of each command whose outcome is unknown; what it
        could tell, in journal order."""
        settled: list[Executed] = []
        for entry in entries:
            if entry.status is not JournalStatus.OUTCOME_UNKNOWN:
                continue
            try:
                answer = await self.kernel.executor.outcome(entry.idempotency_key)
            except Exception:  # it cannot tell now (`OutcomeUntold`: ever): it stays unknown
                continue
            command = planned[entry.command_id]
            if answer is None:
                settled.append(Executed(command, FailedOutcome(code=codes.EXECUTION_NOT_APPLIED)))
                continue
            if not isinstance(answer, ExecutionResult):
                continue
            own = tuple(
                ev
                for ev in answer.events
                if ev.command_id == entry.command_id
                and ev.account_id == ctx.account_id
                and ev.case_key == entry.case_ref.key
            )
            if len(own) != len(answer.events) or not own:
                continue  # a result that is not this command's own is not trusted
            outcome = CommittedOutcome(
                new_revision=answer.new_revision, event_ids=tuple(ev.event_id for ev in own)
            )
            settled.append(Executed(command, outcome, own, replayed=True))
        return settled

    async def _events(
        self, account_id: str, settled: Sequence[JournalEntry]
    ) -> dict[str, DomainEvent]:
        wanted = [
            event_id
            for entry in settled
            if isinstance(entry.outcome, CommittedOutcome)
            for event_id in entry.outcome.event_ids
        ]
        if not wanted:
            return {}
        stored = await self.kernel.stores.events.get_by_ids(account_id, wanted)
        return {ev.event_id: ev for ev in stored}

    # --- the reply ------------------------------------------------------------------------------

    async def _compose(
        self,
        ctx: TurnContext,
        tell: Teller,
        said: Noticed,
        audit: AuditTrail,
        record: ReplayRecord,
        events: Mapping[str, DomainEvent],
        settled: Sequence[JournalEntry],
        card: Interaction | None,
        executed: Sequence[Executed],
    ) -> AssistantTurn:
        """The reply from the ledger and server copy, with the cards the cases need now; `said`:
        what the outcomes it tells of say."""
        understanding = _understanding(record)
        cases = CaseBook(self.kernel.directory, self.kernel.workflows, ctx.account_id)
        touched: set[CaseKey] = {e.case_ref.key for e in settled}
        if card is not None:
            touched.add(card.case_ref.key)
        if understanding.acts or understanding.questions:
            await cases.load_candidates(ctx.conversation_id)
        shown = await self._open_cards(ctx, record)
        touched |= {c.case_ref.key for c in shown}
        factory = CardFactory(
            ctx,
            RecordingCopy(self.kernel.copy, audit.rendered),
            self.kernel.config.max_selection_candidates,
        )
        follow_up = FollowUp(ctx, cases, factory, tell, audit, shown, touched)
        refreshed, unrefreshed = await follow_up.refresh(())
        try:
            async with self.kernel.stores.transaction() as tx, tx.savepoint():
                raised = await follow_up.raise_cards(tx, understanding, [], refreshed)
        except StoreError:  # what it said before it failed stands
            raised = sum(follow_up.said, NOTHING) + noticed(codes.NOTICE_CASE_REFRESH_UNAVAILABLE)
        result = TurnResult(
            understanding=understanding,
            plan=Plan(),
            cases=cases,
            readback=events,
            shown=follow_up.shown,
            touched=frozenset(follow_up.touched),
            executed=executed,
            noticed=merge_notices(said, unrefreshed, raised),
        )
        return await self._composer(ctx, audit).compose(result)

    def _composer(self, ctx: TurnContext, audit: AuditTrail) -> Composer:
        copy = RecordingCopy(self.kernel.copy, audit.rendered)
        return self.kernel.composer(ctx, copy, audit, narrate=False)  # no model request

    async def _open_cards(self, ctx: TurnContext, record: ReplayRecord) -> list[Interaction]:
        """The cards this turn persisted that are still open (they may be shown)."""
        shown = []
        for interaction_id in record.interactions_created:
            try:
                card = await self.kernel.stores.interactions.get(ctx.account_id, interaction_id)
            except NotFound:
                continue
            if card.status is InteractionStatus.ACTIVE:
                shown.append(card)
        return shown

    async def _interrupt(
        self,
        ctx: TurnContext,
        card: Interaction | None,
        record: ReplayRecord,
        audit: AuditTrail,
        recorder: Recorder,
    ) -> RecoveredTurn:
        """Nothing ran: the card the turn claimed is active again, and the turn ends
        `interrupted` with a notice (and the cards it persisted, which are real)."""
        if card is not None and card.status is InteractionStatus.RESOLVING:
            async with self.kernel.stores.transaction() as tx:
                await tx.interactions.finish(
                    ctx.account_id, card.interaction_id, InteractionStatus.ACTIVE
                )
        assistant = self._composer(ctx, audit).interrupted(await self._open_cards(ctx, record))
        async with recorder.events.transaction(self.kernel.stores) as tx:
            await recorder.deliver(tx, assistant, failure_code=codes.RUNTIME_TURN_INTERRUPTED)
        return RecoveredTurn(ctx.account_id, ctx.turn_id, RecoveryOutcome.INTERRUPTED)


def _claimed_by(record: ReplayRecord, interaction_id: str) -> bool:
    """Whether the turn of `record` won the card: its record says so (or, for a record written
    before it said, the turn decided a command the card authorizes)."""
    if record.claimed_interaction is not None:
        return record.claimed_interaction == interaction_id
    return any(
        getattr(decision.origin, "interaction_id", None) == interaction_id
        for decision in record.policy_decisions
    )


def _unknown(entries: Sequence[JournalEntry], executed: Sequence[Executed]) -> set[str]:
    """The commands whose outcome nobody could tell yet (none of `executed` settled them)."""
    told = {e.planned.envelope.command_id for e in executed}
    return {
        e.command_id
        for e in entries
        if e.status is JournalStatus.OUTCOME_UNKNOWN and e.command_id not in told
    }


def _still_unknown(
    card: ClaimedCard, entries: Sequence[JournalEntry], executed: Sequence[Executed]
) -> bool:
    """Whether a command of the card has an outcome nobody could tell yet."""
    unknown = _unknown(entries, executed)
    return any(c.envelope.command_id in unknown for c in card.commands)


def _started_by(entry: JournalEntry, turn_id: str, won: str | None) -> bool:
    """Whether the turn `turn_id` (which won the card `won`, if any) started `entry`: a command
    a card authorizes is started by the turn that won the card, any other by its own turn."""
    via = getattr(entry.origin, "interaction_id", None)
    if via is not None:
        return bool(via == won)
    return entry.turn_id == turn_id


def _ran(entries: Iterable[JournalEntry]) -> list[JournalEntry]:
    """The commands the turn started (a command still awaiting its card never ran), once each,
    in the order given."""
    seen: dict[str, JournalEntry] = {}
    for entry in entries:
        if entry.status is not JournalStatus.AWAITING_CONFIRMATION:
            seen.setdefault(entry.command_id, entry)
    return list(seen.values())


def _own(events: Mapping[str, DomainEvent], command_id: str) -> tuple[DomainEvent, ...]:
    return tuple(ev for ev in events.values() if ev.command_id == command_id)


def _understanding(record: ReplayRecord) -> Understanding:
    if record.understanding is None:
        return Understanding()
    try:
        return Understanding.model_validate(record.understanding)
    except ValueError:
        return Understanding()


def _carried_on(facts: TurnFacts) -> AuditTrail:
    """The trail of a turn recovery carries on: what its stored record states, except what ran
    (recovery tells that again, from the journal)."""
    audit = AuditTrail(
        understanding_problems=list(facts.understanding_problems),
        target_resolutions=list(facts.target_resolutions),
        policy_decisions=list(facts.policy_decisions),
        provider_attempts=list(facts.provider_attempts),
        interactions_created=list(facts.interactions_created),
        interaction_digests=list(facts.interaction_digests),
        erased_interaction_digests=list(facts.erased_interaction_digests),
        outbox_ids=list(facts.outbox_ids),
        claim_violations=list(facts.claim_violations),
        prose_findings=list(facts.prose_findings),
        claimed_interaction=facts.claimed_interaction,
    )
    for render in facts.copy_renders:
        audit.rendered(render)
    return audit


def settled_turn_id(account_id: str, turn_id: str, command_ids: Sequence[str]) -> str:
    """The id of the follow-up turn that tells of `command_ids` of `turn_id`, settled after its
    reply was stored: one per settlement, so a second writer meets the first's turn."""
    return derive_id(
        "turn",
        "turnframe.settled_turn.v1",
        {"account_id": account_id, "turn_id": turn_id, "command_ids": list(command_ids)},
    )
