"""turnframe_store: the store roles, their records and errors, the in-memory reference store,
the SQL store (PostgreSQL and SQLite), fault points, and the conformance suite every
implementation passes.

`turnframe_store.conformance` is public too; import it explicitly to run the suite.
`SqlStores` and `SqlConfig` are imported on first use: importing this package loads no
SQLAlchemy, SQLModel or alembic.
"""

from typing import TYPE_CHECKING, Any

from turnframe_store.bundle import ROLES, ReadOnlyStores, Stores
from turnframe_store.clock import Clock, ManualClock, system_clock
from turnframe_store.errors import (
    Busy,
    Conflict,
    Corrupt,
    ForeignEventLoop,
    InvalidDatabaseUrl,
    InvalidRecord,
    MissingExtra,
    MissingRole,
    NoSnapshot,
    NotFound,
    StoreError,
    Timeout,
    Unavailable,
)
from turnframe_store.faults import FaultPlan, FaultPoint, FiredFault
from turnframe_store.locks import ConversationLocks
from turnframe_store.memory import MemoryStores
from turnframe_store.records import (
    OUTBOX_CLAIM_EXPIRED,
    CaseInvalidation,
    CommitBundle,
    CommitResult,
    ConversationRecord,
    EventCursor,
    EventPage,
    FeedEntry,
    Fresh,
    InteractionFinish,
    JournalAdmission,
    JournalCompletion,
    JournalEntry,
    JournalStatus,
    OutboxEntry,
    OutboxStatus,
    PhaseMarker,
    Replay,
    TimerRecord,
    TimerStatus,
    UserTurnRecord,
)
from turnframe_store.roles import (
    CommandJournal,
    CommandJournalReader,
    CommandJournalWriter,
    CommitStore,
    ConversationReader,
    ConversationStore,
    ConversationWriter,
    EventLedger,
    EventLedgerReader,
    EventLedgerWriter,
    InteractionReader,
    InteractionStore,
    InteractionWriter,
    OutboxReader,
    OutboxStore,
    OutboxWriter,
    ReplayReader,
    ReplayStore,
    ReplayWriter,
    TimerReader,
    TimerStore,
    TimerWriter,
)
from turnframe_store.roles.rules import MAX_INTEGER, MAX_LIMIT, MAX_MILLIS

if TYPE_CHECKING:
    from turnframe_store.sql import SqlConfig, SqlStores

__all__ = [
    "Busy",
    "ConversationLocks",
    # argument bounds (turnframe_store.roles, rule 6)
    "MAX_INTEGER",
    "MAX_LIMIT",
    "MAX_MILLIS",
    # bundle
    "ROLES",
    "ReadOnlyStores",
    "Stores",
    # clock
    "Clock",
    "ManualClock",
    "system_clock",
    # errors
    "Conflict",
    "Corrupt",
    "InvalidRecord",
    "MissingRole",
    "NoSnapshot",
    "MissingExtra",
    "InvalidDatabaseUrl",
    "ForeignEventLoop",
    "NotFound",
    "StoreError",
    "Timeout",
    "Unavailable",
    # faults
    "FaultPlan",
    "FaultPoint",
    "FiredFault",
    # implementations
    "MemoryStores",
    "SqlConfig",
    "SqlStores",
    # roles (each the abstract base class that carries its contract)
    "CommandJournal",
    "CommandJournalReader",
    "CommandJournalWriter",
    "CommitStore",
    "ConversationReader",
    "ConversationStore",
    "ConversationWriter",
    "EventLedger",
    "EventLedgerReader",
    "EventLedgerWriter",
    "InteractionReader",
    "InteractionStore",
    "InteractionWriter",
    "OutboxReader",
    "OutboxStore",
    "OutboxWriter",
    "ReplayReader",
    "ReplayStore",
    "ReplayWriter",
    "TimerReader",
    "TimerStore",
    "TimerWriter",
    # records
    "CaseInvalidation",
    "CommitBundle",
    "CommitResult",
    "ConversationRecord",
    "EventCursor",
    "EventPage",
    "FeedEntry",
    "Fresh",
    "InteractionFinish",
    "JournalAdmission",
    "JournalCompletion",
    "JournalEntry",
    "JournalStatus",
    "OUTBOX_CLAIM_EXPIRED",
    "OutboxEntry",
    "OutboxStatus",
    "PhaseMarker",
    "Replay",
    "TimerRecord",
    "TimerStatus",
    "UserTurnRecord",
]


def __getattr__(name: str) -> Any:
    if name == "SqlStores":
        from turnframe_store.sql.stores import SqlStores

        return SqlStores
    if name == "SqlConfig":
        from turnframe_store.sql.config import SqlConfig

        return SqlConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
