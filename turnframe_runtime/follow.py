"""Following a turn's stream log (DESIGN §8): what `stream_turn` and `resume_stream` read.

The rules:
- a follower ends only after it yielded the turn's terminal event (`turn.completed` or
  `turn.failed`), or by raising: it never returns early, whatever commits between two reads;
- a turn's log that is gone (its turn finished and the log was pruned) raises `StreamExpired`,
  followed or not;
- in this process a turn's writer wakes its followers at once; a turn running elsewhere is read
  again every `stream_poll_ms`, doubling up to `stream_poll_max_ms` while the log stays still,
  so the followers of a turn nobody runs cost a read every few seconds, not four a second;
- at most `stream_followers_per_turn` followers read one turn at a time in this process (the
  caller that started the turn with `stream_turn` is not one of them); one more is refused
  with `TooManyFollowers` before it reads anything. The bound is a process's: each process
  serving readers bounds its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator

from turnframe_core.stream import StreamEvent, is_terminal
from turnframe_core.turn import AssistantTurn
from turnframe_runtime.config import RuntimeConfig
from turnframe_runtime.errors import StreamExpired, StreamInterrupted, TooManyFollowers
from turnframe_runtime.stream import StreamHub
from turnframe_store.bundle import Stores
from turnframe_store.errors import NotFound

__all__ = ["FollowerCount", "Followers"]

_PAGE = 500


class FollowerCount:
    """This process's readers of one kind of log (a turn's stream, a conversation's feed),
    counted per key, at most `bound` per key at once."""

    def __init__(self, bound: int, refusal: str) -> None:
        """`refusal`: the message of the `TooManyFollowers` that refuses one reader more."""
        self._bound = bound
        self._refusal = refusal
        self._lock = threading.Lock()
        self._reading: dict[tuple[str, str], int] = {}

    def reading(self, key: tuple[str, str]) -> int:
        """How many readers of `key` are counted now."""
        with self._lock:
            return self._reading.get(key, 0)

    @contextlib.contextmanager
    def counted(self, key: tuple[str, str]) -> Iterator[None]:
        """One reader of `key` while the block runs; `TooManyFollowers` past the bound, before
        the block runs."""
        with self._lock:
            if self._reading.get(key, 0) >= self._bound:
                raise TooManyFollowers(self._refusal)
            self._reading[key] = self._reading.get(key, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._reading[key] - 1
                if left:
                    self._reading[key] = left
                else:
                    del self._reading[key]


class Followers:
    """This process's readers of turns' stream logs, counted per turn."""

    def __init__(self, stores: Stores, hub: StreamHub, config: RuntimeConfig) -> None:
        self._stores = stores
        self._hub = hub
        self._config = config
        self._count = FollowerCount(
            config.stream_followers_per_turn,
            "this turn has as many stream readers as the runtime allows; try again later",
        )

    async def prune(self, now: int, limit: int = 1_000) -> int:
        """Delete the stream logs of turns finished longer ago than
        `RuntimeConfig.stream_retention_ms` before `now`; how many turns' logs went (at most
        `limit`)."""
        cutoff = now - self._config.stream_retention_ms
        if cutoff <= 0:
            return 0
        async with self._stores.transaction() as tx:
            return await tx.conversations.prune_stream_events(cutoff, limit)

    def reading(self, account_id: str, turn_id: str) -> int:
        """How many followers read the turn's log in this process now."""
        return self._count.reading((account_id, turn_id))

    async def follow(
        self,
        account_id: str,
        turn_id: str,
        after: int,
        task: asyncio.Task[AssistantTurn] | None = None,
        *,
        follow: bool = True,
        admitted: asyncio.Event | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """The log read from `after` on, until its terminal event; with `task` (the turn running
        here, read by the caller that started it, which is never refused nor counted), until
        the task ended, raising its failure when the log did not end; without `follow`, only
        what is logged now. `admitted`, when given, is set when the reader first waits for the
        log to grow: past every refusal (too many readers, a pruned log)."""
        key = (account_id, turn_id)
        counted = self._count.counted(key) if task is None else contextlib.nullcontext()
        with counted:
            async for event in self._read(account_id, turn_id, after, task, follow, admitted):
                yield event

    async def _read(
        self,
        account_id: str,
        turn_id: str,
        after: int,
        task: asyncio.Task[AssistantTurn] | None,
        follow: bool,
        admitted: asyncio.Event | None = None,
    ) -> AsyncIterator[StreamEvent]:
        conversations = self._stores.conversations
        poll = self._config.stream_poll_ms / 1000
        longest = max(self._config.stream_poll_max_ms, self._config.stream_poll_ms) / 1000
        seen_any = after > 0
        while True:
            waiter = self._hub.waiter(account_id, turn_id)
            try:
                ended_before = task is not None and task.done()
                page = await conversations.stream_events(account_id, turn_id, after, _PAGE)
                for event in page:
                    yield event
                    after, seen_any = event.sequence, True
                    if is_terminal(event):
                        return
                if len(page) == _PAGE:
                    continue
                if page:
                    poll = self._config.stream_poll_ms / 1000  # the log moves: read it often
                if task is not None:
                    if ended_before:  # the turn ended here and its log did not: say why
                        if task.cancelled():
                            raise StreamInterrupted(
                                "the turn stopped running before its stream ended; "
                                "resume_stream gives the rest once recovery finished it"
                            )
                        failure = task.exception()
                        if failure is not None:
                            raise failure
                        if not seen_any:
                            raise StreamExpired("this turn's stream log was pruned")
                        raise StreamInterrupted("the turn's stream ended without its last event")
                elif not page:  # nothing new since `after`: has the log grown, ended, or gone?
                    tail = await conversations.stream_tail(account_id, turn_id)
                    if tail is None:
                        if await self._has_ended(account_id, turn_id):
                            raise StreamExpired("this turn's stream log was pruned")
                    elif tail.sequence > after:
                        continue  # logged between the two reads: read it, never skip it
                    elif is_terminal(tail):
                        return  # the reader saw the end already (resumed after it)
                if not follow:
                    return
                if admitted is not None:
                    admitted.set()  # nothing refused it: it waits for the log to grow
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(waiter), poll)
                if not waiter.done():  # nothing woke it: the log is still; read it less often
                    poll = min(poll * 2, longest)
            finally:
                self._hub.forget(account_id, turn_id, waiter)

    async def _has_ended(self, account_id: str, turn_id: str) -> bool:
        """Whether the turn ended or its reply is stored (its stream has nothing more to say)."""
        marker = await self._stores.conversations.get_phase(account_id, turn_id)
        if marker.phase.is_terminal:
            return True
        try:
            await self._stores.conversations.get_assistant_turn(account_id, turn_id)
        except NotFound:
            return False
        return True
