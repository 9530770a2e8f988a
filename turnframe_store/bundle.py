"""`Stores`: one object per role, all eight present; `ReadOnlyStores`: the reader halves only."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, Final, TypeVar, cast

from turnframe_store.errors import MissingRole, NoSnapshot
from turnframe_store.locks import ConversationLocks
from turnframe_store.roles import (
    CommandJournal,
    CommandJournalReader,
    CommitStore,
    ConversationReader,
    ConversationStore,
    EventLedger,
    EventLedgerReader,
    InteractionReader,
    InteractionStore,
    OutboxReader,
    OutboxStore,
    ReplayReader,
    ReplayStore,
    Role,
    TimerReader,
    TimerStore,
)

__all__ = [
    "ROLES",
    "InTransaction",
    "OutboxWakeups",
    "ReadOnlyStores",
    "Stores",
    "protocol_methods",
]


class OutboxWakeups:
    """What a relay waits on between claims. `wait` returns True when new outbox rows may have
    committed, False when the time ran out; either way the relay claims again (so a lost signal
    costs at most one wait). This one only waits: stores without notifications are polled."""

    async def wait(self, timeout_s: float) -> bool:
        await asyncio.sleep(timeout_s)
        return False


_S = TypeVar("_S", bound="Stores")

#: Each role's attribute name and the role type its object must provide.
ROLES: Final[tuple[tuple[str, type], ...]] = (
    ("conversations", ConversationStore),
    ("interactions", InteractionStore),
    ("journal", CommandJournal),
    ("events", EventLedger),
    ("outbox", OutboxStore),
    ("replay", ReplayStore),
    ("timers", TimerStore),
    ("commits", CommitStore),
)
_READERS: Final[tuple[tuple[str, type], ...]] = (
    ("conversations", ConversationReader),
    ("interactions", InteractionReader),
    ("journal", CommandJournalReader),
    ("events", EventLedgerReader),
    ("outbox", OutboxReader),
    ("replay", ReplayReader),
    ("timers", TimerReader),
)


def protocol_methods(role: type) -> tuple[str, ...]:
    """The public methods a role type (one of `turnframe_store.roles`, or a half of one) and the
    role types it extends declare, sorted: what a role object must provide."""
    names: set[str] = set()
    for klass in role.__mro__:
        if not (issubclass(klass, Role) and klass.__module__.startswith("turnframe_store.roles.")):
            continue
        names.update(
            name
            for name, value in vars(klass).items()
            if not name.startswith("_") and callable(value)
        )
    return tuple(sorted(names))


class Stores:
    """The store bundle the runtime is given. Building it without a role raises `MissingRole`."""

    @classmethod
    def assemble(cls: type[_S], **roles: Any) -> _S:
        """A bundle of roles already known to be complete (no protocol check: a hot path)."""
        stores = object.__new__(cls)
        for role, value in roles.items():
            setattr(stores, role, value)
        return stores

    conversations: ConversationStore
    interactions: InteractionStore
    journal: CommandJournal
    events: EventLedger
    outbox: OutboxStore
    replay: ReplayStore
    timers: TimerStore
    commits: CommitStore

    def __init__(
        self,
        *,
        conversations: ConversationStore | None = None,
        interactions: InteractionStore | None = None,
        journal: CommandJournal | None = None,
        events: EventLedger | None = None,
        outbox: OutboxStore | None = None,
        replay: ReplayStore | None = None,
        timers: TimerStore | None = None,
        commits: CommitStore | None = None,
    ) -> None:
        given: dict[str, Any] = {
            "conversations": conversations,
            "interactions": interactions,
            "journal": journal,
            "events": events,
            "outbox": outbox,
            "replay": replay,
            "timers": timers,
            "commits": commits,
        }
        for role, protocol in ROLES:
            value = given[role]
            if value is None:
                raise MissingRole(role)
            lacking = [name for name in protocol_methods(protocol) if not hasattr(value, name)]
            if lacking:
                raise MissingRole(role, f"lacks {', '.join(lacking)}")
            setattr(self, role, value)

    def replace(self, **roles: Any) -> Stores:
        """A plain bundle with the given roles swapped in (e.g. one role wrapped)."""
        current: dict[str, Any] = {role: getattr(self, role) for role, _ in ROLES}
        unknown = set(roles) - set(current)
        if unknown:
            raise TypeError(f"unknown store roles: {sorted(unknown)}")
        current.update(roles)
        return Stores(**current)

    @property
    def transactional(self) -> bool:
        """Whether `transaction()` really commits its calls together (a plain bundle of role
        objects does not)."""
        return False

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Stores]:
        """A unit of work: every call made through the stores it yields commits together when the
        block ends, or none of them does.

        - The block raises: nothing it wrote remains, and the error propagates.
        - A store call in it raises a `StoreError` (a `NotFound` from a read excepted): the
          transaction is doomed. Later calls raise `Conflict`, nothing it wrote remains, and the
          block's end raises `Conflict` even if the caller caught the first error.
        - Calls inside see the transaction's own writes; nobody else sees them before it ends.
        - Inside it, use only the stores it yields (a call through the outer stores may wait for
          the transaction to end). A nested `transaction()` joins the open one.

        `MemoryStores` and `SqlStores` keep this contract and the conformance suite checks it. A
        plain bundle of role objects shares no transaction, so here each call commits on its own.
        """
        yield self

    @contextlib.asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        """Inside a transaction, a nested unit of work: when an error leaves the block, or a
        store call in it failed, everything it wrote is undone, the error (or `Conflict`) leaves
        the block, and the transaction stays usable. Outside a transaction every call commits
        on its own, and this does nothing."""
        yield

    async def driver_connection(self) -> Any:
        """Inside a transaction of stores that share it with the caller's writes (`SqlStores`,
        see `commit_in`): the transaction's own driver connection, for writes that commit with
        it (decision 0029); never begin, commit or roll back on it. Stores that share none, and
        any store outside a transaction, raise `NotImplementedError`."""
        raise NotImplementedError("these stores share no driver connection")

    @contextlib.asynccontextmanager
    async def snapshot(self) -> AsyncIterator[Stores]:
        """Reads as of one moment: every read made through the stores it yields sees the same
        committed state, whatever commits meanwhile, and nothing is written through them (an
        audit reads this way, so a turn finishing while it reads is never a break). Inside a
        transaction it is that transaction. `MemoryStores` and `SqlStores` keep this contract
        (the conformance suite checks it); transactional stores that do not override it raise
        `NoSnapshot`. A plain bundle of role objects, which shares no transaction either, reads
        each call as it comes."""
        if self.transactional:
            raise NoSnapshot(f"{type(self).__name__} is transactional and gives no snapshot()")
        yield self

    def conversation_lock(
        self, account_id: str, conversation_id: str, timeout_s: float = 10.0
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """One holder at a time per conversation (see `turnframe_store.locks`): `Busy` when the
        lock is not free within `timeout_s`. This bundle locks within the process."""
        locks = self.__dict__.get("_conversation_locks")
        if locks is None:
            locks = self.__dict__["_conversation_locks"] = ConversationLocks()
        return locks.hold(account_id, conversation_id, timeout_s)

    def outbox_wakeups(self) -> contextlib.AbstractAsyncContextManager[OutboxWakeups]:
        """What tells a relay that outbox rows committed (PostgreSQL: LISTEN on a connection of
        its own); stores without notifications hand out a plain wait, and the relay polls."""
        return contextlib.nullcontext(OutboxWakeups())

    def read_only(self) -> ReadOnlyStores:
        """A view through which no write method is reachable (the plan-only path holds this)."""
        return ReadOnlyStores(self)

    async def aclose(self) -> None:
        """Release what the stores hold (connections, pools). The base bundle holds nothing."""


class InTransaction(Stores):
    """The roles of one open transaction (a store's `transaction()` yields one): a nested
    transaction joins it, and a snapshot inside it is the transaction. A store supplies
    `savepoint()`."""

    @property
    def transactional(self) -> bool:
        return True

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Stores]:
        yield self

    @contextlib.asynccontextmanager
    async def snapshot(self) -> AsyncIterator[Stores]:
        yield self


class _ReaderView:
    """Exposes exactly a reader protocol's methods of one role object, and nothing else."""

    def __init__(self, target: object, protocol: type) -> None:
        for name in protocol_methods(protocol):
            object.__setattr__(self, name, getattr(target, name))
        object.__setattr__(self, "_role", protocol.__name__)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("a read-only store view cannot be changed")

    def __repr__(self) -> str:
        return f"<read-only {self.__dict__['_role']}>"


class ReadOnlyStores:
    """The reader half of every role; there is no commit role and no write method."""

    conversations: ConversationReader
    interactions: InteractionReader
    journal: CommandJournalReader
    events: EventLedgerReader
    outbox: OutboxReader
    replay: ReplayReader
    timers: TimerReader

    __slots__ = ("conversations", "events", "interactions", "journal", "outbox", "replay", "timers")

    def __init__(self, stores: Stores) -> None:
        for role, protocol in _READERS:
            view = _ReaderView(getattr(stores, role), protocol)
            object.__setattr__(self, role, cast(Any, view))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("a read-only store view cannot be changed")
