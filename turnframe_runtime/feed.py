"""Following a conversation's feed: every stored turn of a conversation, in commit order, what
`TurnRuntime.follow_conversation` reads.

The rules:
- the feed is the conversation's audit chain (`ConversationReader.feed`: one link per final
  record, written in the bundle that stores the turn, positions in commit order); an item's
  `sequence` is its link's position + 1, so a reader resumes after any sequence it saw, in any
  process, and sees every later turn exactly once, in the same order as every other reader;
- a final record without a stored reply (a turn that failed) takes a sequence but yields
  nothing;
- a commit in this process that stored a turn of the conversation (any path: user turns,
  `stream_turn`, outbox follow-ups, recovery, server events; all deliver through one
  `TurnEvents.transaction`) wakes its readers at once; a turn stored by another process is read
  by polling every `stream_poll_ms`, doubling up to `stream_poll_max_ms` while the feed is still;
- the readers of one conversation in this process share ONE poll: a single task reads the
  store after the last position any of them saw and hands the new items to all of them, so a
  wake costs one query however many readers wait; a reader that is behind (resuming from an
  old sequence) first catches up with reads of its own;
- the shared poll keeps only the entries its slowest reader has not handed over yet (each
  reader records its position on the poll), and never more than `_KEPT`: a reader left
  further behind catches up from the store again. Readers that keep up cost no turns kept;
- at most `feed_followers_per_conversation` readers follow one conversation at a time in this
  process; one more is refused with `TooManyFollowers` before it reads anything. The bound is a
  process's: each process serving readers bounds its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections import deque
from collections.abc import AsyncGenerator
from contextlib import AbstractContextManager
from dataclasses import dataclass

from turnframe_core.turn import AssistantTurn
from turnframe_runtime.config import RuntimeConfig
from turnframe_runtime.follow import FollowerCount
from turnframe_runtime.stream import StreamHub
from turnframe_store.bundle import Stores
from turnframe_store.records import FeedEntry

__all__ = ["ConversationFeeds", "FeedItem"]

_PAGE = 200
#: the most entries a shared poll keeps for a slow reader; one further behind reads the store
_KEPT = 1_000


@dataclass(frozen=True)
class FeedItem:
    """One stored turn of a conversation's feed: `sequence` (from 1, in commit order; an SSE
    event id: resume after it) and the turn exactly as stored."""

    sequence: int
    turn: AssistantTurn


class ConversationFeeds:
    """This process's readers of conversations' feeds, counted per conversation, each
    conversation's followers sharing one poll."""

    def __init__(self, stores: Stores, hub: StreamHub, config: RuntimeConfig) -> None:
        self._stores = stores
        self._hub = hub
        self._config = config
        self._lock = threading.Lock()
        self._count = FollowerCount(
            config.feed_followers_per_conversation,
            "this conversation has as many feed readers as the runtime allows; try again later",
        )
        self._polls: dict[tuple[asyncio.AbstractEventLoop, str, str], _SharedPoll] = {}

    def reading(self, account_id: str, conversation_id: str) -> int:
        """How many readers follow the conversation's feed in this process now."""
        return self._count.reading((account_id, conversation_id))

    def kept(self, account_id: str, conversation_id: str) -> int:
        """How many feed entries this process's shared polls keep for the conversation's
        readers now (what its slowest reader has not handed over yet)."""
        with self._lock:
            polls = [p for p in self._polls.values() if p.key[1:] == (account_id, conversation_id)]
        return sum(poll.kept for poll in polls)

    def counted(self, account_id: str, conversation_id: str) -> AbstractContextManager[None]:
        """One reader of the conversation while the block runs; `TooManyFollowers` past the
        bound (nothing read)."""
        return self._count.counted((account_id, conversation_id))

    async def follow(
        self, account_id: str, conversation_id: str, after: int, *, follow: bool
    ) -> AsyncGenerator[FeedItem, None]:
        """The feed after position `after` (-1: from the start); without `follow`, only what is
        stored now. The caller counted this reader and checked the conversation is the
        account's."""
        while True:
            # Catch up on reads of its own until a page comes back short (the feed's end now).
            page = await self._stores.conversations.feed(account_id, conversation_id, after, _PAGE)
            for entry in page:
                after = entry.position
                if entry.turn is not None:
                    yield FeedItem(entry.position + 1, entry.turn)
            if len(page) == _PAGE:
                continue
            if not follow:
                return
            poll, reader = self._join(account_id, conversation_id, after, at_end=not page)
            try:
                while True:
                    changed = poll.changed  # taken before reading what is kept
                    entries = poll.after(after)
                    if entries is None:
                        break  # behind what the shared poll keeps: catch up from the store
                    for entry in entries:
                        after = entry.position
                        if entry.turn is not None:
                            yield FeedItem(entry.position + 1, entry.turn)
                    if entries:
                        poll.seen(reader, after)  # handed over: the poll may drop them
                    else:
                        if poll.failure is not None:
                            raise poll.failure
                        await asyncio.shield(changed)  # never cancels the shared future
            finally:
                self._leave(poll, reader)

    def _join(
        self, account_id: str, conversation_id: str, after: int, *, at_end: bool
    ) -> tuple[_SharedPoll, int]:
        """The conversation's shared poll, joined by a reader at `after`, and the reader's
        token on it; `at_end`: its last read found nothing after `after`. A poll that starts
        past such a reader started from a position a reader only claimed (beyond the feed's
        end, or since grown past), or dropped what every other reader had seen: it reads again
        from the reader's, so that no reader is left behind it for good."""
        key = (asyncio.get_running_loop(), account_id, conversation_id)
        with self._lock:
            poll = self._polls.get(key)
            if poll is None or poll.stopped:
                poll = _SharedPoll(self._stores, self._hub, self._config, key, after)
                self._polls[key] = poll
            elif at_end and after < poll.base:
                poll.rewind(after)
            reader = poll.join(after)
        return poll, reader

    def _leave(self, poll: _SharedPoll, reader: int) -> None:
        with self._lock:
            if poll.leave(reader):
                return
            if self._polls.get(poll.key) is poll:
                del self._polls[poll.key]
        poll.stop()


class _SharedPoll:
    """One conversation's poll in one event loop: reads the feed after the last position read,
    keeps the entries its slowest reader has not handed over (at most `_KEPT`), and wakes its
    readers (`changed`) when it read something or failed. Its readers are touched only from
    its loop."""

    def __init__(
        self,
        stores: Stores,
        hub: StreamHub,
        config: RuntimeConfig,
        key: tuple[asyncio.AbstractEventLoop, str, str],
        after: int,
    ) -> None:
        self.key = key
        self.loop, self.account_id, self.conversation_id = key
        self.stopped = False
        self.failure: Exception | None = None
        self.changed: asyncio.Future[None] = self.loop.create_future()
        self.base = after  # the entries kept are those after `base`, up to `_head`
        self._head = after
        self._kept: deque[FeedEntry] = deque()
        #: each reader's last position handed over, by its token
        self._positions: dict[int, int] = {}
        self._tokens = itertools.count()
        self._stores = stores
        self._hub = hub
        self._shortest = config.stream_poll_ms / 1000
        self._longest = max(config.stream_poll_max_ms, config.stream_poll_ms) / 1000
        self._task = self.loop.create_task(self._run())

    @property
    def kept(self) -> int:
        return len(self._kept)

    def join(self, position: int) -> int:
        """A reader at `position` joins; its token."""
        reader = next(self._tokens)
        self._positions[reader] = position
        return reader

    def seen(self, reader: int, position: int) -> None:
        """The reader handed over every entry up to `position`."""
        before = self._positions[reader]
        self._positions[reader] = position
        if self._kept and before < self._kept[0].position:  # it may have been the slowest
            self._trim()

    def leave(self, reader: int) -> int:
        """The reader left; how many readers remain."""
        del self._positions[reader]
        self._trim()
        return len(self._positions)

    def after(self, position: int) -> list[FeedEntry] | None:
        """The kept entries after `position`; None when some after it are no longer (or were
        never) kept, or the poll stopped."""
        if position < self.base or (self.stopped and self.failure is None):
            return None
        return [entry for entry in self._kept if entry.position > position]

    def rewind(self, after: int) -> None:
        """Read again from `after`: what is kept is dropped, and the read under way (which
        started from further on) is abandoned."""
        self.base = self._head = after
        self._kept.clear()
        self._task.cancel()
        self._task = self.loop.create_task(self._run())

    def stop(self) -> None:
        self.stopped = True
        self._task.cancel()

    def _trim(self) -> None:
        """Drop the entries every reader handed over, and the oldest past `_KEPT` (a reader
        that needed one finds `after` None and catches up from the store)."""
        slowest = min(self._positions.values(), default=self._head)
        kept = self._kept
        while kept and (kept[0].position <= slowest or len(kept) > _KEPT):
            self.base = kept.popleft().position

    def _publish(self) -> None:
        changed, self.changed = self.changed, self.loop.create_future()
        changed.set_result(None)

    async def _run(self) -> None:
        hub, conversations = self._hub, self._stores.conversations
        wait = self._shortest
        try:
            while True:
                waiter = hub.conversation_waiter(self.account_id, self.conversation_id)
                try:
                    page = await conversations.feed(
                        self.account_id, self.conversation_id, self._head, _PAGE
                    )
                    if page:
                        self._kept.extend(page)
                        self._head = page[-1].position
                        self._trim()
                        self._publish()
                        wait = self._shortest  # the feed moves: read it often
                        if len(page) == _PAGE:
                            continue
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(asyncio.shield(waiter), wait)
                    if not waiter.done():  # nothing woke it: the feed is still
                        wait = min(wait * 2, self._longest)
                finally:
                    hub.forget_conversation(self.account_id, self.conversation_id, waiter)
        except Exception as failure:  # its readers raise it; the next reader starts anew
            self.failure = failure
            self.stopped = True
            self._publish()
