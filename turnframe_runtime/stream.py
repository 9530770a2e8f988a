"""A turn's stream (DESIGN §8): events logged with the durable point that makes them true, and
read back from that log by every reader, live or resumed.

The rules:
- an event is published only once the transaction that logged it committed, so a reader never
  sees progress a rollback took back, and every reader (the live one included) reads the same
  log: a resumed stream equals the live one event for event;
- progress (`turn.phase`, `turn.step`) is logged with the durable point it reports; blocks are
  logged with the stored reply, after `turn.phase` `committed`, so nothing that states an outcome
  and no model delta precedes the commit, and no prose precedes its review;
- `turn.completed` is logged in the transaction that stores the turn; a turn that fails before
  any effect logs `turn.failed` with its marker; nothing follows either;
- a turn a crash interrupted is finished by recovery, which logs the rest of its stream after
  what the log holds (in the mode the stream began in).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from turnframe_core.replay import TurnPhase
from turnframe_core.stream import (
    StreamEvent,
    StreamMode,
    TurnCompleted,
    TurnFailed,
    TurnPhaseEvent,
    TurnStep,
    block_events,
    is_terminal,
)
from turnframe_core.turn import AssistantTurn
from turnframe_runtime import observe
from turnframe_store.bundle import Stores

__all__ = ["StreamHub", "TurnEvents", "read_log"]

#: (account_id, turn_id) for a turn's stream; ("conversation", account_id, conversation_id) for
#: a conversation's feed (the lengths differ, so the two never collide).
_Key = tuple[str, ...]


class StreamHub:
    """Wakes this process's readers of a turn's stream when its log grew, and of a
    conversation's feed when a commit stored one of its turns. Readers in other processes poll
    the store instead; a lost wake-up costs one poll interval, never an event."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[_Key, set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]] = {}

    def waiter(self, account_id: str, turn_id: str) -> asyncio.Future[None]:
        """A future that completes at the next `notify` for the turn. Take it BEFORE reading the
        log, so a write between the read and the wait is not missed."""
        return self._waiter((account_id, turn_id))

    def forget(self, account_id: str, turn_id: str, future: asyncio.Future[None]) -> None:
        self._forget((account_id, turn_id), future)

    def notify(self, account_id: str, turn_id: str) -> None:
        self._notify((account_id, turn_id))

    def conversation_waiter(self, account_id: str, conversation_id: str) -> asyncio.Future[None]:
        """A future that completes at the next `notify_conversation` for the conversation (take
        it BEFORE reading the feed)."""
        return self._waiter(("conversation", account_id, conversation_id))

    def forget_conversation(
        self, account_id: str, conversation_id: str, future: asyncio.Future[None]
    ) -> None:
        self._forget(("conversation", account_id, conversation_id), future)

    def notify_conversation(self, account_id: str, conversation_id: str) -> None:
        """A commit stored a turn of the conversation."""
        self._notify(("conversation", account_id, conversation_id))

    def _waiter(self, key: _Key) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            self._waiters.setdefault(key, set()).add((loop, future))
        return future

    def _forget(self, key: _Key, future: asyncio.Future[None]) -> None:
        with self._lock:
            waiting = self._waiters.get(key)
            if waiting is None:
                return
            waiting.discard((future.get_loop(), future))
            if not waiting:
                del self._waiters[key]

    def _notify(self, key: _Key) -> None:
        with self._lock:
            waiting = self._waiters.pop(key, set())
        for loop, future in waiting:
            with contextlib.suppress(RuntimeError):  # that loop has closed: nobody waits there
                loop.call_soon_threadsafe(_wake, future)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class TurnEvents:
    """One turn's stream events: built as the turn goes, numbered and logged with the bundle of
    the durable point they report (`take`), published when that transaction committed
    (`transaction`). Events of a transaction that failed are dropped, and the numbering starts
    again from the log."""

    def __init__(
        self,
        account_id: str,
        turn_id: str,
        clock: Callable[[], int],
        *,
        mode: StreamMode = StreamMode.WHOLE,
        hub: StreamHub | None = None,
        fresh: bool,
        logged: bool = True,
        only_if_begun: bool = False,
    ) -> None:
        """`fresh`: a turn just begun (nothing is logged yet). `logged` False: this turn keeps no
        log (`RuntimeConfig.stream_every_turn` off and nobody streams it). `only_if_begun`:
        carry a log on only if one was begun (recovery, when not every turn is logged)."""
        self.account_id = account_id
        self.turn_id = turn_id
        self.mode = mode
        self._clock = clock
        self._hub = hub
        self._pending: list[dict[str, Any]] = []
        self._inflight: list[StreamEvent] = []
        # The last sequence known to be logged; None: unknown (read the log's tail first).
        self._logged: int | None = 0 if fresh else None
        # The log holds a terminal event, or this turn keeps none: nothing more is logged.
        self._ended = not logged
        self._only_if_begun = only_if_begun
        self._committed_shown = False
        self._open = 0
        # The conversation of a reply queued (`reply`), and of one taken into the open
        # transaction with the number of events taken before it (for `undo_to`): its commit
        # wakes the conversation's feed readers.
        self._reply_queued: str | None = None
        self._reply_taken: tuple[str, int] | None = None

    # --- what happened ---------------------------------------------------------------------------

    def phase(self, phase: TurnPhase) -> None:
        if phase is TurnPhase.COMMITTED and (
            self._committed_shown
            or any(p.get("phase") is TurnPhase.COMMITTED for p in self._pending)
            or any(_is_committed(e) for e in self._inflight)
        ):
            return  # shown once
        fields: dict[str, Any] = {"type": "turn.phase", "phase": phase}
        if phase is TurnPhase.RECEIVED:
            fields["mode"] = self.mode
        self._pending.append(fields)

    def step(self, step: str) -> None:
        self._pending.append({"type": "turn.step", "step": step})

    def reply(self, turn: AssistantTurn, *, settled: bool, hashes: Sequence[str]) -> None:
        """The stored reply: `committed` (when not yet shown), `composed`, its blocks in order
        (`hashes`: their digests, as the record holds them), `delivered` when every outcome is
        known, then `turn.completed`."""
        self.phase(TurnPhase.COMMITTED)
        self.phase(TurnPhase.COMPOSED)
        self._reply_queued = turn.conversation_id
        self._pending.append({"type": "blocks", "turn": turn, "hashes": hashes})
        if settled:
            self.phase(TurnPhase.DELIVERED)
        self._pending.append({"type": "turn.completed", "turn": turn})

    def failed(self, code: str) -> None:
        self._pending.append({"type": "turn.failed", "code": code})

    # --- logging them ----------------------------------------------------------------------------

    def mark(self) -> int:
        """How many events the open transaction has taken (for `undo_to`)."""
        return len(self._inflight)

    def undo_to(self, mark: int) -> None:
        """A savepoint holding the events taken since `mark` rolled back: they were not logged,
        and nothing queued since (for a bundle that never came) is logged either."""
        del self._inflight[mark:]
        self._pending.clear()
        self._reply_queued = None
        if self._reply_taken is not None and self._reply_taken[1] >= mark:
            self._reply_taken = None

    def take(self, phase: TurnPhase | None = None) -> tuple[StreamEvent, ...]:
        """The pending events (after `phase`'s, when given), numbered on from the log, for the
        bundle the open transaction writes; empty once the log has ended."""
        if phase is not None:
            self.phase(phase)
        pending, self._pending = self._pending, []
        if self._reply_queued is not None:  # stored by the bundle this is taken into
            self._reply_taken = (self._reply_queued, len(self._inflight))
            self._reply_queued = None
        if self._ended or not pending:
            return ()
        assert self._logged is not None, "take() runs inside TurnEvents.transaction()"
        last = self._inflight[-1].sequence if self._inflight else self._logged
        at = self._clock()
        events: list[StreamEvent] = []
        index = 0
        for item in pending:
            kind = item["type"]
            if kind == "blocks":
                turn: AssistantTurn = item["turn"]
                hashes = item["hashes"]
                for index, block in enumerate(turn.blocks):
                    built = block_events(
                        block,
                        index,
                        turn_id=self.turn_id,
                        first_sequence=last + 1,
                        at=at,
                        mode=self.mode,
                        content_hash=hashes[index],
                    )
                    events.extend(built)
                    last = built[-1].sequence
                continue
            last += 1
            common = {"turn_id": self.turn_id, "sequence": last, "at": at}
            if kind == "turn.phase":
                events.append(TurnPhaseEvent(**common, phase=item["phase"], mode=item.get("mode")))
            elif kind == "turn.step":
                events.append(TurnStep(**common, step=item["step"]))
            elif kind == "turn.completed":
                events.append(TurnCompleted(**common, turn=item["turn"]))
            else:
                events.append(TurnFailed(**common, code=item["code"]))
        self._inflight.extend(events)
        return tuple(events)

    async def append(self, stores: Stores, phase: TurnPhase | None = None) -> None:
        """Log the pending events on their own, in the open transaction."""
        events = self.take(phase)
        if events:
            await stores.conversations.append_stream_events(self.account_id, events)

    @contextlib.asynccontextmanager
    async def transaction(self, stores: Stores) -> AsyncIterator[Stores]:
        """`stores.transaction()`, after which the events it logged are published (readers are
        woken), and the readers of the conversation's feed are woken when it stored the turn's
        reply (every stored turn is delivered through `Recorder.deliver`, in a transaction
        opened here); if it fails, they were not logged (or, past a timeout, may have been): the
        numbering starts again from the log's tail."""
        if self._open:  # a nested transaction joins the open one
            async with stores.transaction() as tx:
                yield tx
            return
        self._open += 1
        try:
            with observe.span("store.transaction"):
                async with stores.transaction() as tx:
                    if self._logged is None and not self._ended:
                        await self._resync(tx)
                    yield tx
        except BaseException:
            self._logged = None  # re-read the log: a timed-out COMMIT may have landed
            self._inflight.clear()
            self._pending.clear()
            self._reply_queued = self._reply_taken = None
            raise
        finally:
            self._open -= 1
        replied, self._reply_taken = self._reply_taken, None
        if replied is not None and self._hub is not None:
            self._hub.notify_conversation(self.account_id, replied[0])
        if self._inflight:
            self._logged = self._inflight[-1].sequence
            self._ended = is_terminal(self._inflight[-1])
            self._committed_shown |= any(_is_committed(e) for e in self._inflight)
            self._inflight.clear()
            if self._hub is not None:
                self._hub.notify(self.account_id, self.turn_id)

    async def _resync(self, stores: Stores) -> None:
        """Learn what the log holds (after a failed transaction, or when recovery carries a turn
        on): where it ends, whether it ended, the mode it began in, whether `committed` shows."""
        logged = await read_log(stores, self.account_id, self.turn_id)
        self._logged = logged[-1].sequence if logged else 0
        self._ended = (bool(logged) and is_terminal(logged[-1])) or (
            self._only_if_begun and not logged
        )
        self._committed_shown = any(_is_committed(e) for e in logged)
        if logged and isinstance(logged[0], TurnPhaseEvent) and logged[0].mode is not None:
            self.mode = logged[0].mode


_PAGE = 1_000


async def read_log(stores: Stores, account_id: str, turn_id: str) -> list[StreamEvent]:
    """A turn's whole stream log as stored now, read a page at a time."""
    logged: list[StreamEvent] = []
    after = 0
    while True:
        page = await stores.conversations.stream_events(account_id, turn_id, after, _PAGE)
        logged.extend(page)
        if len(page) < _PAGE:
            return logged
        after = page[-1].sequence


def _is_committed(event: StreamEvent) -> bool:
    return isinstance(event, TurnPhaseEvent) and event.phase is TurnPhase.COMMITTED
