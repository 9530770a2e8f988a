"""The commit role in memory: a bundle applied on one undo log, through each role's writes."""

from __future__ import annotations

import functools

from turnframe_core.cases import CaseKey
from turnframe_core.erasure import TurnErasure
from turnframe_core.events import DomainEvent
from turnframe_core.interactions import Interaction
from turnframe_core.replay import CommandOutcome, ReplayRecord, TurnPhase
from turnframe_core.turn import AssistantTurn
from turnframe_store.errors import StoreError
from turnframe_store.faults import FaultPoint
from turnframe_store.memory.conversations import MemoryConversations
from turnframe_store.memory.engine import MemoryEngine, MemoryRole
from turnframe_store.memory.events import MemoryEvents
from turnframe_store.memory.interactions import MemoryInteractions
from turnframe_store.memory.journal import MemoryJournal
from turnframe_store.memory.outbox import MemoryOutbox
from turnframe_store.memory.replay import MemoryReplay
from turnframe_store.memory.state import UndoLog
from turnframe_store.records import (
    CommitBundle,
    CommitResult,
    InteractionFinish,
    JournalAdmission,
    JournalEntry,
    OutboxEntry,
    UserTurnRecord,
)
from turnframe_store.roles import conversations as turn_rules
from turnframe_store.roles import rules
from turnframe_store.roles.commits import CommitStore, write_bundle
from turnframe_store.roles.conversations import StreamEntry
from turnframe_store.roles.erasure import TurnDocuments, plan_erasure

__all__ = ["MemoryBundleWriter", "MemoryCommits"]


class MemoryBundleWriter:
    """A `BundleWriter`: applies each item of one bundle through the roles' writes, on the
    bundle's undo log."""

    def __init__(
        self,
        roles: MemoryCommits,
        undo: UndoLog,
        bundle: CommitBundle,
        deferred: list[StoreError] | None = None,
    ) -> None:
        self.roles = roles
        self.engine = roles.engine
        self.undo = undo
        #: a fault to raise once the bundle committed
        self.deferred: list[StoreError] = deferred if deferred is not None else []
        self.account_id = bundle.account_id
        self.turn_id = bundle.turn_id
        self.events: tuple[DomainEvent, ...] = ()
        self.invalidated: list[str] = []
        self.admissions: list[JournalAdmission] = []

    def accept(self, record: UserTurnRecord) -> None:
        conversations = self.roles.conversations
        conversations.ensure_conversation_in(self.undo, record.account_id, record.conversation_id)
        conversations.append_user_turn_in(self.undo, record)

    def admit(self, entry: JournalEntry) -> None:
        self.admissions.append(self.roles.journal.begin_in(self.undo, entry))

    def start(self, command_id: str) -> None:
        self.roles.journal.mark_executing_in(self.undo, self.account_id, command_id)

    def answer(self, turn: AssistantTurn) -> None:
        self.roles.conversations.append_assistant_turn_in(self.undo, self.account_id, turn, None)

    def complete(self, command_id: str, outcome: CommandOutcome) -> None:
        self.roles.journal.complete_in(self.undo, self.account_id, command_id, outcome)

    def append(self, events: tuple[DomainEvent, ...]) -> None:
        self.events = self.roles.events.append_in(self.undo, self.account_id, events)

    def finish(self, settled: InteractionFinish) -> None:
        self.roles.interactions.finish_in(self.undo, self.account_id, settled)

    def invalidate(self, case_key: CaseKey, current_revision: int) -> None:
        interactions = self.roles.interactions
        moved = interactions.invalidate_in(self.undo, self.account_id, case_key, current_revision)
        self.invalidated.extend(moved)

    def insert(self, card: Interaction) -> None:
        self.roles.interactions.insert_in(self.undo, card)

    def enqueue(self, row: OutboxEntry) -> None:
        self.roles.outbox.enqueue_in(self.undo, row)

    def put_replay(self, record: ReplayRecord) -> None:
        self.roles.replay.put_in(self.undo, record)

    def set_phase(self, phase: TurnPhase) -> None:
        self.roles.conversations.set_phase_in(self.undo, self.account_id, self.turn_id, phase)

    def stream(self, entries: tuple[StreamEntry, ...]) -> None:
        self.roles.conversations.append_stream_events_in(
            self.undo, self.account_id, self.turn_id, entries
        )

    def reach(self, point: FaultPoint) -> None:
        if point is FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK:  # fires once committed
            fault = self.engine.faults.take(point)
            if fault is not None:
                self.deferred.append(fault)
            return
        self.engine.faults.reach(point)


class MemoryCommits(MemoryRole, CommitStore):
    """`CommitStore` in memory: the bundle is one write of the engine (one undo log), each item
    applied by its own role's `*_in` write."""

    #: the bundle writer (a test may break one item)
    writer: type[MemoryBundleWriter] = MemoryBundleWriter

    def __init__(self, engine: MemoryEngine) -> None:
        super().__init__(engine)
        self.conversations = MemoryConversations(engine)
        self.interactions = MemoryInteractions(engine)
        self.journal = MemoryJournal(engine)
        self.events = MemoryEvents(engine)
        self.outbox = MemoryOutbox(engine)
        self.replay = MemoryReplay(engine)

    async def _commit(self, bundle: CommitBundle) -> CommitResult:
        deferred: list[StoreError] = []
        result = await self.engine.write(lambda undo: self.commit_in(undo, bundle, deferred))
        if deferred:  # the bundle committed (or will, with its transaction); then the call fails
            if self.engine.transaction is None:
                raise deferred[0]
            self.engine.transaction.after_commit = deferred[0]
        return result

    def commit_in(
        self, undo: UndoLog, bundle: CommitBundle, deferred: list[StoreError] | None = None
    ) -> CommitResult:
        """Write the bundle on `undo`; a fault that fires once it committed goes to `deferred`."""
        writer = self.writer(self, undo, bundle, deferred if deferred is not None else [])
        write_bundle(bundle, writer)
        return CommitResult(
            admissions=tuple(writer.admissions),
            events=writer.events,
            invalidated=tuple(writer.invalidated),
        )

    def _replace_event(self, undo: UndoLog, event: DomainEvent) -> None:
        """`event` in place of the stored event of its id, in the ledger and both its orders."""
        t = self.engine.t
        key = (event.account_id, event.event_id)
        stored = t.events[key]
        undo.put(t.events, key, event)
        for ordered in (
            t.events_by_account[event.account_id],
            t.events_by_case[(event.account_id, event.workflow, event.case_id)],
        ):
            at = ordered.index(stored)
            ordered[at] = event
            undo.step(functools.partial(ordered.__setitem__, at, stored))

    async def _erase_turn(self, account_id: str, turn_id: str) -> TurnErasure:
        return await self.engine.write(lambda undo: self.erase_turn_in(undo, account_id, turn_id))

    def erase_turn_in(self, undo: UndoLog, account_id: str, turn_id: str) -> TurnErasure:
        """`erase_turn` on `undo`: the turn's documents read and rewritten in one write."""
        t = self.engine.t
        key = (account_id, turn_id)
        record = rules.found(t.replay.get(key))
        stored_reply = t.assistant_turns.get(key)
        journal = tuple(t.journal[(account_id, c)] for c in t.journal_by_turn.get(key, ()))
        outbox = tuple(t.outbox[o] for o in record.outbox_ids if o in t.outbox)
        docs = TurnDocuments(
            record=record,
            user_turn=t.user_turns.get(key),
            reply=None if stored_reply is None else turn_rules.reload_answer(stored_reply),
            journal=journal,
            outbox=outbox,
            stream_events=len(t.stream.get(key, ())),
            events=tuple(
                t.events[(account_id, e)] for e in record.event_ids if (account_id, e) in t.events
            ),
            cards=tuple(
                t.cards[(account_id, i)]
                for i in record.interactions_created
                if (account_id, i) in t.cards
            ),
        )
        plan = plan_erasure(docs, self.engine.clock())
        if plan.user_turn is not None:
            undo.put(t.user_turns, key, plan.user_turn)
        if plan.reply is not None:
            undo.put(t.assistant_turns, key, turn_rules.answer_text(plan.reply))
        for entry in plan.journal:
            undo.put(t.journal, (account_id, entry.command_id), entry)
        for row in plan.outbox:
            undo.put(t.outbox, row.outbox_id, row)
        for card in plan.cards:
            undo.put(t.cards, (account_id, card.interaction_id), card)
        for event in plan.events:
            self._replace_event(undo, event)
        if plan.drop_stream:
            undo.remove(t.stream, key)
        if plan.record is not None:
            undo.put(t.replay, key, plan.record)
        if plan.complete and key not in t.replay_erased:
            undo.put(t.replay_erased, key, self.engine.clock())
        return plan.result
