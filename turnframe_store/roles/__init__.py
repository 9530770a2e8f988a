"""The eight store roles. Each role's abstract base class is its contract: the public methods with
their docstrings, argument checks and fault points, and the abstract hooks (`_name`) a store
implements with storage and its compare-and-swap, judged by the role module's judges. Every role
but commits is a reader and a writer half; `ReadOnlyStores` exposes only the reader's methods.

Rules every implementation keeps (DESIGN §6):

1. Account scoping is total: the first argument is the account, and another account's record is
   indistinguishable from a missing one (`NotFound`; lists simply omit it). Exceptions: the outbox
   (a system queue addressed by `outbox_id`) and the operator sweeps `expire_due`,
   `list_unfinished_turns` and the timers' `claim_due`, whose rows carry their account.
2. Only the errors of `turnframe_store.errors` are raised, each with its stable code.
3. Compare-and-swap in the writing step, never a blind overwrite: repeating a settled transition
   with the same data is accepted; settling it differently is `Conflict`, with nothing written.
4. Nothing is rewritten: card payloads, journal commands, events and assistant turns are
   immutable; only lifecycle fields move.
5. Every list names its sort key (below), so every implementation returns the same order. A list
   never raises `NotFound`: a missing or foreign parent gives an empty list.
6. Arguments are judged before anything else (a fault point included), and a refused one is
   `InvalidRecord` with nothing written: a limit is an int (never a bool) from 1 to `MAX_LIMIT`;
   a time is integer milliseconds from 0 to `MAX_MILLIS`; a revision or a sequence runs from 0
   to `MAX_INTEGER`; an id or key (case ids, destinations, reasons included) holds no NUL and
   no lone surrogate.
"""

from turnframe_store.roles.commits import CommitStore
from turnframe_store.roles.conversations import (
    ConversationReader,
    ConversationStore,
    ConversationWriter,
)
from turnframe_store.roles.events import EventLedger, EventLedgerReader, EventLedgerWriter
from turnframe_store.roles.interactions import (
    InteractionReader,
    InteractionStore,
    InteractionWriter,
)
from turnframe_store.roles.journal import CommandJournal, CommandJournalReader, CommandJournalWriter
from turnframe_store.roles.outbox import OutboxReader, OutboxStore, OutboxWriter
from turnframe_store.roles.replay import ReplayReader, ReplayStore, ReplayWriter
from turnframe_store.roles.rules import Role
from turnframe_store.roles.timers import TimerReader, TimerStore, TimerWriter

__all__ = [
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
    "Role",
    "TimerReader",
    "TimerStore",
    "TimerWriter",
]
