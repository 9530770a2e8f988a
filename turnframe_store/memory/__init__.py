"""`MemoryStores`: the deterministic in-memory reference implementation of every store role.

- One `threading.Lock` guards all state. Every method does its work synchronously under it and
  awaits nothing while holding it, so the store is safe across event loops and threads.
- Lifecycle times (completed_at, updated_at, resolved_at, …) come from the injectable clock.
- Every list is sorted by the key its protocol names, never by dict or insertion order.
- Every write applies in place while recording undo steps (`_state._UndoLog`); a failure replays
  them backwards. A commit therefore costs O(items in the bundle), never O(state).
- Fault points (`turnframe_store.faults`) fire through `MemoryStores.faults`.
- The store decides nothing itself: argument rules and fault points come with the shared roles
  (`turnframe_store._roles`), every other decision from `turnframe_store._rules`.

The role classes (`MemoryConversations`, …) share one `_Engine`; they are public for tests that
need to alter one role, but adopters use `MemoryStores`.
"""

# The engine and its state stay importable here for tests and benchmarks that alter a role.
from turnframe_store.memory._engine import _Engine as _Engine
from turnframe_store.memory._state import _Tables as _Tables
from turnframe_store.memory._state import _UndoLog as _UndoLog
from turnframe_store.memory._stores import (
    MemoryCommits,
    MemoryConversations,
    MemoryEvents,
    MemoryInteractions,
    MemoryJournal,
    MemoryOutbox,
    MemoryReplay,
    MemoryStores,
)

__all__ = [
    "MemoryCommits",
    "MemoryConversations",
    "MemoryEvents",
    "MemoryInteractions",
    "MemoryJournal",
    "MemoryOutbox",
    "MemoryReplay",
    "MemoryStores",
]
