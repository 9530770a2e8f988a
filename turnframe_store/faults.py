"""Named fault points at the store's boundaries (DESIGN §12), and the plan that arms them.

A point names a moment, and a fault fired there leaves the store as it is at that moment: an
`after_*` point raises after the write it names (which stays visible), a `before_*` point raises
before anything is written. Inside a commit bundle the moment is inside the bundle's open
transaction: the point fires after the stage it names (only when that stage wrote something) and,
like a crash there, leaves nothing of the bundle.

Where each point fires, and what it leaves:

- `before_journal_insert`: in `journal.begin`, before the write. The key stays free.
- `after_journal_insert_before_commit`: in `journal.begin` after a fresh admission (the entry
  stays pending); in a commit after stage 1, the journal completions (nothing of the bundle).
- `after_commit_before_event_readback`: in `events.append` after the append (the events stay);
  in a commit, the commit lands and then the call fails: a bundle committed on its own raises
  once it committed, and one inside `Stores.transaction()` makes the transaction's end raise
  after its COMMIT (the events and everything else the transaction wrote stay; the caller
  never read them back). Only a bundle that wrote events crosses it.
- `after_interaction_persistence`: in `interactions.insert*` after the write (the card stays);
  in a commit after stage 5, the card inserts (nothing of the bundle).
- `before_outbox_dispatch`: in `outbox.claim_due`, before claiming. No row moves.
- `after_outbox_dispatch`: in `outbox.mark_*`, before the result is recorded. The row stays
  dispatching, with its claim.
- `before_response_persistence`: in `conversations.append_assistant_turn`, before the write.
  No assistant turn is stored.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from enum import StrEnum

from turnframe_store.errors import StoreError, Timeout, Unavailable

__all__ = ["FaultPlan", "FaultPoint", "FiredFault"]


class FaultPoint(StrEnum):
    AFTER_INTERACTION_PERSISTENCE = "after_interaction_persistence"
    BEFORE_JOURNAL_INSERT = "before_journal_insert"
    AFTER_JOURNAL_INSERT_BEFORE_COMMIT = "after_journal_insert_before_commit"
    AFTER_COMMIT_BEFORE_EVENT_READBACK = "after_commit_before_event_readback"
    BEFORE_OUTBOX_DISPATCH = "before_outbox_dispatch"
    AFTER_OUTBOX_DISPATCH = "after_outbox_dispatch"
    BEFORE_RESPONSE_PERSISTENCE = "before_response_persistence"

    @property
    def leaves_write_visible(self) -> bool:
        """True when the write this point follows stays after the fault fires (outside a bundle)."""
        return self.value.startswith("after_")

    def default_error(self) -> StoreError:
        """`Timeout` (may have landed) after a write; `Unavailable` (nothing written) before one."""
        message = f"injected fault at {self.value}"
        return Timeout(message) if self.leaves_write_visible else Unavailable(message)


@dataclass(frozen=True)
class FiredFault:
    point: FaultPoint
    error: StoreError


@dataclass
class _Armed:
    error: StoreError
    skip: int


class FaultPlan:
    """Faults armed by point. Each fires once, at its point, in arming order, and is consumed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed: dict[FaultPoint, deque[_Armed]] = {}
        self._fired: list[FiredFault] = []
        self._crossed: dict[FaultPoint, int] = {}

    def arm(self, point: FaultPoint, *, error: StoreError | None = None, skip: int = 0) -> None:
        """Fire `error` (default: `point.default_error()`) at the (skip+1)-th crossing of `point`.

        Faults armed at the same point queue up: the first armed fires first.
        """
        if skip < 0:
            raise ValueError("skip counts crossings to let through; it cannot be negative")
        with self._lock:
            queue = self._armed.setdefault(FaultPoint(point), deque())
            queue.append(_Armed(error if error is not None else point.default_error(), skip))

    def reach(self, point: FaultPoint) -> None:
        """A store crossed `point`: raise the fault armed first there, if its turn has come."""
        with self._lock:
            self._crossed[point] = self._crossed.get(point, 0) + 1
            queue = self._armed.get(point)
            if not queue:
                return
            head = queue[0]
            if head.skip > 0:
                head.skip -= 1
                return
            queue.popleft()
            self._fired.append(FiredFault(point, head.error))
        raise head.error

    def take(self, point: FaultPoint) -> StoreError | None:
        """As `reach`, but hand the fault over instead of raising it: for a point whose fault
        fires later (after a commit)."""
        try:
            self.reach(point)
        except StoreError as fault:
            return fault
        return None

    def armed(self) -> tuple[FaultPoint, ...]:
        """Points with a fault still waiting, one entry per fault, in point order."""
        with self._lock:
            return tuple(point for point in FaultPoint for _ in self._armed.get(point, ()))

    def crossings(self, point: FaultPoint) -> int:
        """How many times a store crossed `point` under this plan, armed or not."""
        with self._lock:
            return self._crossed.get(FaultPoint(point), 0)

    @property
    def fired(self) -> tuple[FiredFault, ...]:
        with self._lock:
            return tuple(self._fired)

    def clear(self) -> None:
        """Disarm everything (the record of fired faults stays)."""
        with self._lock:
            self._armed.clear()
