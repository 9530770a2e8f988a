"""MemoryStores' state and its write discipline: every write records how to undo itself."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TypeVar

from turnframe_core.audit_chain import ChainLink
from turnframe_core.events import DomainEvent
from turnframe_core.interactions import Interaction
from turnframe_core.replay import ReplayRecord
from turnframe_store.records import (
    ConversationRecord,
    JournalEntry,
    OutboxEntry,
    PhaseMarker,
    TimerRecord,
    UserTurnRecord,
)
from turnframe_store.roles.conversations import StreamEntry

__all__ = ["Key2", "Key3", "Tables", "UndoLog"]

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")


class UndoLog:
    """The steps that reverse what one write did, replayed backwards on failure."""

    __slots__ = ("_steps",)

    def __init__(self) -> None:
        self._steps: list[Callable[[], object]] = []

    def put(self, table: dict[K, V], key: K, value: V) -> None:
        if key in table:
            self._steps.append(partial(table.__setitem__, key, table[key]))
        else:
            self._steps.append(partial(table.__delitem__, key))
        table[key] = value

    def remove(self, table: dict[K, V], key: K) -> None:
        if key in table:
            self._steps.append(partial(table.__setitem__, key, table[key]))
            del table[key]

    def index(self, table: dict[K, list[T]], key: K, value: T) -> None:
        """Append `value` to the list at `key` (creating it)."""
        items = table.get(key)
        if items is None:
            items = []
            self.put(table, key, items)
        items.append(value)
        self._steps.append(items.pop)

    def step(self, undo: Callable[[], object]) -> None:
        self._steps.append(undo)

    def mark(self) -> int:
        """A point to roll back to (`rollback_to`)."""
        return len(self._steps)

    def rollback_to(self, mark: int) -> None:
        while len(self._steps) > mark:
            self._steps.pop()()

    def extend(self, later: UndoLog) -> None:
        """Take over the steps of a later write (undone before this log's own)."""
        self._steps.extend(later._steps)

    def rollback(self) -> None:
        while self._steps:
            self._steps.pop()()


Key2 = tuple[str, str]
Key3 = tuple[str, str, str]


class Tables:
    """All state. Keys lead with the account except on the outbox (a system queue)."""

    def __init__(self) -> None:
        self.conversations: dict[Key2, ConversationRecord] = {}
        self.user_turns: dict[Key2, UserTurnRecord] = {}
        self.turns_by_conversation: dict[Key2, list[str]] = {}
        self.assistant_turns: dict[Key2, str] = {}
        self.phases: dict[Key2, PhaseMarker] = {}
        self.unfinished: dict[Key2, None] = {}
        self.cards: dict[Key2, Interaction] = {}
        self.blocking_slot: dict[Key3, str] = {}
        self.cards_by_case: dict[Key3, list[str]] = {}
        self.cards_by_conversation: dict[Key2, list[str]] = {}
        self.cards_expiring: dict[Key2, None] = {}
        self.journal: dict[Key2, JournalEntry] = {}
        self.journal_by_key: dict[Key2, str] = {}
        self.journal_by_turn: dict[Key2, list[str]] = {}
        self.events: dict[Key2, DomainEvent] = {}
        self.events_by_account: dict[str, list[DomainEvent]] = {}
        self.events_by_case: dict[Key3, list[DomainEvent]] = {}
        self.last_sequence = 0
        self.outbox: dict[str, OutboxEntry] = {}
        self.outbox_by_key: dict[Key2, str] = {}
        self.outbox_by_command: dict[str, list[str]] = {}
        self.outbox_pending: dict[str, None] = {}
        self.outbox_dispatching: dict[str, None] = {}
        self.replay: dict[Key2, ReplayRecord] = {}
        self.replay_first_put: dict[Key2, int] = {}
        self.replay_by_token: dict[Key2, str] = {}
        self.replay_by_conversation: dict[Key2, list[str]] = {}
        #: when each (account, turn)'s words were all erased
        self.replay_erased: dict[Key2, int] = {}
        #: each conversation's audit chain, link n at index n
        self.audit_chain: dict[Key2, list[ChainLink]] = {}
        #: the (account, turn)s the chain links
        self.audit_linked: dict[Key2, None] = {}
        #: each turn's log, entry n - 1 holding sequence n
        self.stream: dict[Key2, list[StreamEntry]] = {}
        self.timers: dict[Key2, TimerRecord] = {}
        self.timers_by_conversation: dict[Key2, list[str]] = {}
        #: the (account, timer)s a sweep may claim: pending or claimed
        self.timers_open: dict[Key2, None] = {}

    def copy(self) -> Tables:
        """A copy that no later write reaches (values are immutable; lists are copied)."""
        copied = Tables.__new__(Tables)
        for name, value in vars(self).items():
            if isinstance(value, dict):
                value = {k: list(v) if isinstance(v, list) else v for k, v in value.items()}
            setattr(copied, name, value)
        return copied
