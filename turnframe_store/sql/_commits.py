"""The commit bundle on SQL (internal): one transaction (one pipeline on PostgreSQL) holding every
item's steps in `roles.commits.write_bundle`'s order, the phase marker folded in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from turnframe_core.cases import CaseKey
from turnframe_core.erasure import TurnErasure
from turnframe_core.events import DomainEvent
from turnframe_core.interactions import Interaction
from turnframe_core.replay import CommandOutcome, ReplayRecord, TurnPhase
from turnframe_core.turn import AssistantTurn
from turnframe_store.errors import StoreError
from turnframe_store.faults import FaultPoint
from turnframe_store.records import (
    CommitBundle,
    CommitResult,
    InteractionFinish,
    JournalEntry,
    OutboxEntry,
    UserTurnRecord,
)
from turnframe_store.roles import commits as commit_rules
from turnframe_store.roles.commits import CommitStore
from turnframe_store.roles.conversations import StreamEntry
from turnframe_store.sql._conversations import SqlConversations
from turnframe_store.sql._core import SqlCore, Step, check
from turnframe_store.sql._erasure import SqlErasure
from turnframe_store.sql._events import SqlEvents
from turnframe_store.sql._interactions import SqlInteractions
from turnframe_store.sql._journal import SqlJournal
from turnframe_store.sql._outbox import SqlOutbox
from turnframe_store.sql._replay import SqlReplay

__all__ = ["SqlCommits"]


class SqlCommits(CommitStore):
    def __init__(
        self,
        core: SqlCore,
        *,
        conversations: SqlConversations,
        interactions: SqlInteractions,
        journal: SqlJournal,
        events: SqlEvents,
        outbox: SqlOutbox,
        replay: SqlReplay,
    ) -> None:
        super().__init__(core.faults)
        self._core = core
        self._roles = _SqlRoles(conversations, interactions, journal, events, outbox, replay)
        self._erasure = SqlErasure(core)

    async def _commit(self, bundle: CommitBundle) -> CommitResult:
        return await self._write(bundle, None)

    async def _erase_turn(self, account_id: str, turn_id: str) -> TurnErasure:
        return await self._erasure.erase_turn(account_id, turn_id)

    async def commit_in(self, connection: Any, bundle: CommitBundle) -> CommitResult:
        """`commit`, inside the caller's open transaction on its driver `connection`."""
        self._check(bundle)
        return await self._write(bundle, connection)

    async def _write(self, bundle: CommitBundle, enlisted: Any) -> CommitResult:
        """The bundle in one transaction; fault points fire after the stage they name, inside
        the transaction (as memory's do). With `enlisted` (a caller's driver connection inside
        its own open transaction) the bundle joins that transaction."""
        ordered: dict[str, DomainEvent] | None = {} if enlisted is None else None
        writer = _BundleSteps(self._roles, self._core, bundle, ordered)
        commit_rules.write_bundle(bundle, writer)
        if enlisted is None:
            values = await self._core.write(writer.steps)
        else:
            values = await self._core.write_enlisted(enlisted, writer.steps)
        if writer.deferred:  # the bundle committed (or will, with its transaction); then it fails
            if enlisted is not None:
                raise writer.deferred[0]
            self._core.defer(writer.deferred[0])
        events = self._roles.events.stored(values[slice(*writer.event_steps)])
        if ordered:
            events = self._roles.events.committed(events, ordered)
        invalidated = [ids for at in writer.invalidation_steps for ids in values[at]]
        admissions = tuple(values[at] for at in writer.admission_steps)
        return CommitResult(admissions=admissions, events=events, invalidated=tuple(invalidated))


@dataclass(frozen=True)
class _SqlRoles:
    conversations: SqlConversations
    interactions: SqlInteractions
    journal: SqlJournal
    events: SqlEvents
    outbox: SqlOutbox
    replay: SqlReplay


class _BundleSteps:
    """Collects each item's steps, noting where the event and invalidation values will be."""

    def __init__(
        self,
        roles: _SqlRoles,
        core: SqlCore,
        bundle: CommitBundle,
        ordered: dict[str, DomainEvent] | None,
    ) -> None:
        self.roles = roles
        #: the events as committed, once their transaction committed (see `SqlEvents`)
        self.ordered = ordered
        self.faults = core.faults
        self.account_id = bundle.account_id
        self.turn_id = bundle.turn_id
        self.steps: list[Step] = []
        self.event_steps = (0, 0)
        self.invalidation_steps: list[int] = []
        self.admission_steps: list[int] = []
        #: a fault to raise once the bundle committed
        self.deferred: list[StoreError] = []

    def accept(self, record: UserTurnRecord) -> None:
        self.steps.extend(self.roles.conversations.accept_steps(record))

    def admit(self, entry: JournalEntry) -> None:
        self.admission_steps.append(len(self.steps))
        self.steps.append(self.roles.journal.begin_step(entry))

    def start(self, command_id: str) -> None:
        self.steps.append(self.roles.journal.start_step(self.account_id, command_id))

    def answer(self, turn: AssistantTurn) -> None:
        self.steps.extend(self.roles.conversations.answer_steps(self.account_id, turn))

    def complete(self, command_id: str, outcome: CommandOutcome) -> None:
        self.steps.extend(self.roles.journal.complete_steps(self.account_id, command_id, outcome))

    def append(self, events: tuple[DomainEvent, ...]) -> None:
        start = len(self.steps)
        self.steps.extend(self.roles.events.append_steps(events, self.ordered))
        self.event_steps = (start, len(self.steps))

    def finish(self, settled: InteractionFinish) -> None:
        self.steps.extend(self.roles.interactions.finish_steps(self.account_id, settled))

    def invalidate(self, case_key: CaseKey, current_revision: int) -> None:
        self.invalidation_steps.append(len(self.steps))
        cards = self.roles.interactions
        self.steps.extend(cards.invalidate_steps(self.account_id, case_key, current_revision))

    def insert(self, card: Interaction) -> None:
        self.steps.extend(self.roles.interactions.insert_steps(card))

    def enqueue(self, row: OutboxEntry) -> None:
        self.steps.extend(self.roles.outbox.enqueue_steps(row))

    def put_replay(self, record: ReplayRecord) -> None:
        self.steps.extend(self.roles.replay.replay_steps(record))

    def set_phase(self, phase: TurnPhase) -> None:
        self.steps.extend(
            self.roles.conversations.phase_steps(self.account_id, self.turn_id, phase)
        )

    def stream(self, entries: tuple[StreamEntry, ...]) -> None:
        self.steps.extend(self.roles.conversations.stream.append_steps(self.account_id, entries))

    def reach(self, point: FaultPoint) -> None:
        """A fault point inside the bundle's open transaction: firing it leaves nothing; the
        read-back point fires once the bundle committed (see `faults`)."""
        faults = self.faults
        if point is FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK:
            deferred = self.deferred

            def take() -> None:
                fault = faults.take(point)
                if fault is not None:
                    deferred.append(fault)

            self.steps.append(check(take))
            return
        self.steps.append(check(lambda: faults.reach(point)))
