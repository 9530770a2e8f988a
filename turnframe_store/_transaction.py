"""What every store's open transaction tracks, whatever it writes with (internal)."""

from __future__ import annotations

from turnframe_store.errors import Conflict, StoreError

__all__ = ["TransactionState"]


class TransactionState:
    """One open `Stores.transaction()`: whether it ended, the store error that doomed it (after
    which it only rolls back), and a fault that fires once it committed
    (`after_commit_before_event_readback`)."""

    def __init__(self) -> None:
        self.failure: BaseException | None = None
        self.closed = False
        self.after_commit: StoreError | None = None

    def usable(self) -> None:
        if self.closed:
            raise RuntimeError("the transaction has ended; its stores are no longer usable")
        if self.failure is not None:
            raise Conflict("an earlier operation failed; the transaction only rolls back")
