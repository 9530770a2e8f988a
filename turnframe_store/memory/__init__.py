"""`MemoryStores`: the deterministic in-memory reference implementation of every store role.

- One `threading.Lock` guards all state (`engine`). Every method does its work synchronously
  under it and awaits nothing while holding it, so the store is safe across event loops and
  threads.
- Lifecycle times (completed_at, updated_at, resolved_at, …) come from the injectable clock.
- Every list is sorted by the key its role names, never by dict or insertion order.
- Every write applies in place while recording undo steps (`state.UndoLog`); a failure replays
  them backwards. A commit therefore costs O(items in the bundle), never O(state).
- Fault points (`turnframe_store.faults`) fire through `MemoryStores.faults`.
- The store decides nothing itself: argument rules, fault points and judges come with the roles
  (`turnframe_store.roles`); each module here implements one role's hooks on the shared state.

The role classes (`MemoryConversations`, …) are public for tests that alter one role (built on a
store's `engine`); adopters use `MemoryStores`.
"""

from turnframe_store.memory.commits import MemoryBundleWriter, MemoryCommits
from turnframe_store.memory.conversations import MemoryConversations
from turnframe_store.memory.engine import MemoryEngine, MemoryTransaction
from turnframe_store.memory.events import MemoryEvents
from turnframe_store.memory.interactions import MemoryInteractions
from turnframe_store.memory.journal import MemoryJournal
from turnframe_store.memory.outbox import MemoryOutbox
from turnframe_store.memory.replay import MemoryReplay
from turnframe_store.memory.state import Tables, UndoLog
from turnframe_store.memory.stores import MemoryStores
from turnframe_store.memory.timers import MemoryTimers

__all__ = [
    "MemoryBundleWriter",
    "MemoryCommits",
    "MemoryConversations",
    "MemoryEngine",
    "MemoryEvents",
    "MemoryInteractions",
    "MemoryJournal",
    "MemoryOutbox",
    "MemoryReplay",
    "MemoryStores",
    "MemoryTransaction",
    "MemoryTimers",
    "Tables",
    "UndoLog",
]
