"""The commit role: a bundle applied all-or-nothing in its normative order (`write_bundle`), each
item with its own role's rules; a store supplies a `BundleWriter`, which only stores.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Protocol

from turnframe_core.cases import CaseKey
from turnframe_core.erasure import TurnErasure
from turnframe_core.events import DomainEvent
from turnframe_core.interactions import Interaction
from turnframe_core.replay import CommandOutcome, ReplayRecord, TurnPhase
from turnframe_core.turn import AssistantTurn
from turnframe_store.errors import InvalidRecord
from turnframe_store.faults import FaultPoint
from turnframe_store.records import (
    CommitBundle,
    CommitResult,
    InteractionFinish,
    JournalEntry,
    OutboxEntry,
    UserTurnRecord,
)
from turnframe_store.roles.conversations import StreamEntry, stream_entries
from turnframe_store.roles.journal import admissible
from turnframe_store.roles.rules import Role, case, record_keys, text


def bundle_keys(bundle: CommitBundle) -> None:
    """`record_keys` for every record a bundle writes, and the rules of its single items."""
    for entry in bundle.journal_admissions:
        admissible(entry)
    text(*bundle.journal_starts)
    if bundle.assistant_turn is not None and not bundle.assistant_turn.status.is_terminal:
        raise InvalidRecord("only a terminal assistant turn is stored")
    records: tuple[DomainEvent | Interaction | JournalEntry | OutboxEntry, ...] = (
        *bundle.journal_admissions,
        *bundle.events,
        *bundle.interaction_inserts,
        *bundle.outbox,
    )
    for record in records:
        record_keys(record)
    for invalidation in bundle.invalidations:
        case(invalidation)
    if bundle.stream_events:
        _stream_entries(bundle)


def _stream_entries(bundle: CommitBundle) -> tuple[StreamEntry, ...]:
    """`stream_entries` of the bundle's stream events, serialized once per bundle: the check
    before a commit and the write inside it use the same entries."""
    return bundle.cached("stream_entries", lambda: stream_entries(bundle.stream_events))


class BundleWriter(Protocol):
    """How one store applies each item of a commit bundle, inside the bundle's transaction."""

    def accept(self, record: UserTurnRecord) -> None: ...

    def admit(self, entry: JournalEntry) -> None: ...

    def start(self, command_id: str) -> None: ...

    def answer(self, turn: AssistantTurn) -> None: ...

    def complete(self, command_id: str, outcome: CommandOutcome) -> None: ...

    def append(self, events: tuple[DomainEvent, ...]) -> None: ...

    def finish(self, settled: InteractionFinish) -> None: ...

    def invalidate(self, case_key: CaseKey, current_revision: int) -> None: ...

    def insert(self, card: Interaction) -> None: ...

    def enqueue(self, row: OutboxEntry) -> None: ...

    def put_replay(self, record: ReplayRecord) -> None: ...

    def set_phase(self, phase: TurnPhase) -> None: ...

    def stream(self, entries: tuple[StreamEntry, ...]) -> None: ...

    def reach(self, point: FaultPoint) -> None: ...


def write_bundle(bundle: CommitBundle, writer: BundleWriter) -> None:
    """Hand the bundle's items to `writer` in the normative order (user turn, journal
    admissions, journal starts, journal completions, events, card finishes, invalidations, card
    inserts, outbox rows, assistant turn, replay record, phase marker, stream events), each
    fault point where its stage names it, only when that stage writes something (decision
    0002)."""
    if bundle.user_turn is not None:
        writer.accept(bundle.user_turn)
    if bundle.journal_admissions:
        writer.reach(FaultPoint.BEFORE_JOURNAL_INSERT)
        for entry in bundle.journal_admissions:
            writer.admit(entry)
    for command_id in bundle.journal_starts:
        writer.start(command_id)
    for completion in bundle.journal_completions:
        writer.complete(completion.command_id, completion.outcome)
    if bundle.journal_admissions or bundle.journal_completions:
        writer.reach(FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT)
    if bundle.events:
        writer.append(bundle.events)
        writer.reach(FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK)
    for settled in bundle.interaction_finishes:
        writer.finish(settled)
    for invalidation in bundle.invalidations:
        writer.invalidate(invalidation.case_key, invalidation.current_revision)
    for card in bundle.interaction_inserts:
        writer.insert(card)
    if bundle.interaction_inserts:
        writer.reach(FaultPoint.AFTER_INTERACTION_PERSISTENCE)
    for row in bundle.outbox:
        writer.enqueue(row)
    if bundle.assistant_turn is not None:
        writer.reach(FaultPoint.BEFORE_RESPONSE_PERSISTENCE)
        writer.answer(bundle.assistant_turn)
    if bundle.replay is not None:
        writer.put_replay(bundle.replay)
    if bundle.phase is not None:
        writer.set_phase(bundle.phase)
    if bundle.stream_events:
        writer.stream(_stream_entries(bundle))


class CommitStore(Role, ABC):
    """The commit role."""

    async def commit(self, bundle: CommitBundle) -> CommitResult:
        """Apply the bundle all-or-nothing in its normative order: journal completions, events,
        card finishes, invalidations, card inserts, outbox rows, the replay record, the phase
        marker, the stream events (after the assistant turn). Each item keeps its own role's
        rules; if any item fails, nothing of the bundle remains and that item's error is
        raised."""
        self._check(bundle)
        return await self._commit(bundle)

    @staticmethod
    def _check(bundle: CommitBundle) -> None:
        """What every commit checks before it writes anything."""
        bundle.require_valid()
        bundle_keys(bundle)

    @abstractmethod
    async def _commit(self, bundle: CommitBundle) -> CommitResult:
        """Apply the bundle all-or-nothing, its items in `write_bundle`'s order."""

    async def erase_turn(self, account_id: str, turn_id: str) -> TurnErasure:
        """Erase the words one turn stored, as `roles.erasure.plan_erasure` says, reading and
        writing in one transaction (all of it or none); `NotFound` when the account holds no
        record of the turn. Idempotent."""
        text(account_id, turn_id)
        return await self._erase_turn(account_id, turn_id)

    @abstractmethod
    async def _erase_turn(self, account_id: str, turn_id: str) -> TurnErasure:
        """Read the turn's documents, apply `plan_erasure` at the store's clock, write it."""
