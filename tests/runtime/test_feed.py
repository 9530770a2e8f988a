"""A conversation's feed (`follow_conversation`) on every backend: every stored turn in commit
order, resumable after any sequence; a follower is woken at once by a turn stored in this
process (an outbox follow-up included) and finds one stored by another runtime by polling; the
followers of one conversation share one read per wake; one past the bound is refused; a
conversation that is not the account's is not found, like a missing one. And
`follow_up_turns` names the turn the outbox will write when it answers the turn's row.

No test waits for time to pass: a follower's progress is read from the store reads it made
(`_Reads`) and from the items it handed over (`_Follower`)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import pytest

from turnframe_core import CommandPolicy, TurnStatus, act
from turnframe_core.turn import AssistantTurn
from turnframe_runtime import (
    FeedItem,
    Relay,
    RuntimeConfig,
    TooManyFollowers,
    TurnRuntime,
    follow_up_turn_id,
)
from turnframe_runtime.feed import ConversationFeeds
from turnframe_runtime.follow import FollowerCount
from turnframe_runtime.stream import StreamHub
from turnframe_store import (
    FaultPoint,
    FeedEntry,
    NotFound,
    OutboxEntry,
    OutboxStatus,
    Stores,
    Timeout,
    Unavailable,
)
from turnframe_test import DeskHarness

REBOOK = "trip.request_rebooking"
ANSWER = "trip.record_airline_answer"
DeskFactory = Callable[..., Awaitable[DeskHarness]]
#: long enough that only a wake-up delivers within a test's wait
NEVER_POLL = RuntimeConfig(
    locales=("en", "it", "de"), stream_poll_ms=600_000, stream_poll_max_ms=600_000
)
WAIT = 15  # seconds a test waits for an item it expects, at most


class _Reads:
    """Counts the store's feed reads, and lets a test wait until a number of them happened."""

    def __init__(self, stores: Stores, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        #: raised by the next read instead of reading
        self.fail: Exception | None = None
        self._reached: list[tuple[int, asyncio.Event]] = []
        read = stores.conversations.feed

        async def counted(*args: Any, **kwargs: Any) -> tuple[FeedEntry, ...]:
            if self.fail is not None:
                failure, self.fail = self.fail, None
                raise failure
            entries = await read(*args, **kwargs)
            self.count += 1
            for number, event in self._reached:
                if self.count >= number:
                    event.set()
            return entries

        monkeypatch.setattr(stores.conversations, "feed", counted)

    async def reach(self, number: int) -> None:
        event = asyncio.Event()
        if self.count >= number:
            return
        self._reached.append((number, event))
        await asyncio.wait_for(event.wait(), WAIT)


class _Follower:
    """A reader of a conversation's feed running in its own task."""

    def __init__(self, feed: AsyncIterator[FeedItem]) -> None:
        self.items: asyncio.Queue[FeedItem] = asyncio.Queue()
        self.task = asyncio.ensure_future(self._read(feed))

    async def _read(self, feed: AsyncIterator[FeedItem]) -> None:
        async for item in feed:
            await self.items.put(item)

    async def next(self) -> FeedItem:
        return await asyncio.wait_for(self.items.get(), WAIT)

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.task


@contextlib.asynccontextmanager
async def _following(
    runtime: TurnRuntime, account_id: str, conversation_id: str, count: int = 1, after: int = 0
) -> AsyncIterator[list[_Follower]]:
    followers = [
        _Follower(runtime.follow_conversation(account_id, conversation_id, after))
        for _ in range(count)
    ]
    try:
        yield followers
    finally:
        for follower in followers:
            await follower.stop()


async def _opened(desk: DeskHarness) -> None:
    """The conversation exists before its first turn (an app opens it when a client arrives)."""
    await desk.stores.conversations.ensure_conversation(desk.account_id, desk.conversation_id)


async def _feed_now(desk: DeskHarness, after: int = 0) -> list[FeedItem]:
    feed = desk.runtime.follow_conversation(
        desk.account_id, desk.conversation_id, after, follow=False
    )
    return [item async for item in feed]


def _ids(turns: Sequence[FeedItem | AssistantTurn]) -> list[str]:
    return [t.turn.turn_id if isinstance(t, FeedItem) else t.turn_id for t in turns]


def _name_grace() -> Any:
    return act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper")


async def _three_turns(desk: DeskHarness) -> list[str]:
    desk.ready_trip()
    turns = [
        await desk.say("Rename me", act("a1", "trip.set_name", "h1", "Rename me", name="Grace")),
        await desk.say("What about Rome?"),
        await desk.say("Rename again", act("a1", "trip.set_name", "h1", "again", name="Ada")),
    ]
    return [turn.turn_id for turn in turns]


async def _confirmed(desk: DeskHarness) -> tuple[str, OutboxEntry]:
    """A rebooking confirmed by a click: the click's turn id and its outbox row."""
    desk.ready_trip()
    asked = await desk.say("Rebook", act("a1", REBOOK, "h1", "Rebook", leg="outbound"))
    sent = await desk.click(desk.card(asked), "opt_rebook")
    journal = await desk.journal(sent)
    (row,) = await desk.stores.outbox.list_for_command(journal[-1].command_id)
    return sent.turn_id, row


async def _answered(desk: DeskHarness, row: OutboxEntry) -> None:
    """The relay claims the row and publishes it; the dispatch actor carries it out and records
    the airline's answer (as tests/outbox drive them)."""
    published: list[OutboxEntry] = []

    async def to_dispatch(rows: Sequence[OutboxEntry]) -> list[bool]:
        published.extend(rows)
        return [True] * len(rows)

    async def to_reconcile(rows: Sequence[OutboxEntry]) -> list[bool]:
        return [False] * len(rows)

    relay = Relay(
        desk.stores, to_dispatch, to_reconcile, config=desk.runtime.outbox.config, clock=desk.clock
    )
    await relay.round()
    (claimed,) = published
    assert claimed.outbox_id == row.outbox_id
    await desk.runtime.outbox.dispatch(claimed.outbox_id, claimed.attempt_count)


# --- reading --------------------------------------------------------------------------------


async def test_the_feed_yields_every_stored_turn_in_commit_order(desk: DeskHarness) -> None:
    turn_ids = await _three_turns(desk)

    items = await _feed_now(desk)

    chain = await desk.stores.replay.chain(desk.account_id, desk.conversation_id)
    assert [item.turn.turn_id for item in items] == turn_ids
    assert [item.turn.turn_id for item in items] == [link.turn_id for link in chain]
    assert [item.sequence for item in items] == [link.position + 1 for link in chain]
    for item in items:
        stored = await desk.runtime.load_turn(desk.account_id, item.turn.turn_id)
        assert item.turn.to_stored_json() == stored.to_stored_json()


async def test_a_reader_resumes_after_any_sequence_it_saw(desk: DeskHarness) -> None:
    await _three_turns(desk)
    everything = await _feed_now(desk)

    for index, item in enumerate(everything):
        assert await _feed_now(desk, after=item.sequence) == everything[index + 1 :]
    assert await _feed_now(desk, after=0) == everything


async def test_a_follower_catches_up_then_gets_the_next_turn_stored_here_at_once(
    make_desk: DeskFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    desk = await make_desk(config=NEVER_POLL)
    first, *_ = await _three_turns(desk)
    reads = _Reads(desk.stores, monkeypatch)

    async with _following(desk.runtime, desk.account_id, desk.conversation_id, after=1) as (
        follower,
    ):
        caught_up = [await follower.next(), await follower.next()]
        await reads.reach(2)  # its own catch-up read, then the shared poll's first: it waits
        turn = await desk.say("Once more")
        woken = await follower.next()

    assert first not in [item.turn.turn_id for item in caught_up]
    assert [item.sequence for item in caught_up] == [2, 3]
    assert (woken.sequence, woken.turn) == (4, turn)


async def test_a_reader_resuming_past_the_end_leaves_the_shared_poll_serving_the_others(
    make_desk: DeskFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    desk = await make_desk(config=NEVER_POLL)
    await desk.say("Hello")
    reads = _Reads(desk.stores, monkeypatch)
    runtime, account, conversation = desk.runtime, desk.account_id, desk.conversation_id

    async with _following(runtime, account, conversation, after=100) as (ahead,):
        await reads.reach(2)  # its catch-up read, and the shared poll's from its position
        async with _following(runtime, account, conversation) as (reader,):
            first = await reader.next()
            await reads.reach(5)  # caught up twice, and the poll read again from its position
            turn = await desk.say("Hello again")
            second = await reader.next()
        settled = reads.count

    assert [first.sequence, second.sequence] == [1, 2]
    assert second.turn == turn
    assert ahead.items.empty()  # nothing after its sequence 100 yet
    assert settled == 6  # one read for the wake, no loop of reads


# --- wake-ups from other paths ------------------------------------------------------------------


async def test_a_follow_up_turn_the_outbox_writes_reaches_a_follower(
    make_desk: DeskFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    desk = await make_desk(config=NEVER_POLL)
    click_turn, row = await _confirmed(desk)
    promised = await desk.runtime.follow_up_turns(desk.account_id, click_turn)
    already = len(await _feed_now(desk))
    reads = _Reads(desk.stores, monkeypatch)

    async with _following(desk.runtime, desk.account_id, desk.conversation_id, after=already) as (
        follower,
    ):
        await reads.reach(2)
        await _answered(desk, row)
        item = await follower.next()

    answer = follow_up_turn_id(desk.account_id, row.outbox_id, "answer")
    assert promised == (answer,)
    assert item.turn.turn_id == answer
    assert desk.receipt_codes(item.turn) == ["trip.rebooked"]
    assert (await desk.stores.outbox.get(row.outbox_id)).status is OutboxStatus.COMPLETED


async def test_a_turn_another_runtime_stores_reaches_a_follower_by_polling(
    make_desk: DeskFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    quick = dataclasses.replace(NEVER_POLL, stream_poll_ms=5, stream_poll_max_ms=20)
    desk = await make_desk(config=quick)
    # another process in effect: its own runtime (and hub) on the same stores
    elsewhere = desk.another_process()
    await _opened(desk)
    reads = _Reads(desk.stores, monkeypatch)

    async with _following(desk.runtime, desk.account_id, desk.conversation_id) as (follower,):
        await reads.reach(2)
        turn = await elsewhere.say("Hello from elsewhere")
        item = await follower.next()

    assert (item.sequence, item.turn) == (1, turn)


async def test_a_turn_recovery_finishes_reaches_a_follower(
    make_desk: DeskFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    desk = await make_desk(config=NEVER_POLL)
    desk.ready_trip()
    desk.stores.faults.arm(FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT)  # the start point
    with pytest.raises(Timeout):
        await desk.say("Name Grace Hopper", _name_grace())
    reads = _Reads(desk.stores, monkeypatch)

    async with _following(desk.runtime, desk.account_id, desk.conversation_id) as (follower,):
        await reads.reach(2)
        (recovered,) = (await desk.runtime.recover_unfinished()).turns
        item = await follower.next()

    assert item.sequence == 1
    assert item.turn.turn_id == recovered.turn_id
    assert item.turn.status is TurnStatus.INTERRUPTED


async def test_a_turn_that_failed_without_a_reply_takes_a_sequence_and_yields_nothing(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    desk.stores.faults.arm(FaultPoint.BEFORE_JOURNAL_INSERT, error=Unavailable("down"))
    with pytest.raises(Unavailable):
        await desk.say("Name Grace Hopper", _name_grace())
    turn = await desk.say("Hello")

    items = await _feed_now(desk)

    assert [(item.sequence, item.turn) for item in items] == [(2, turn)]


# --- sharing and bounds -------------------------------------------------------------------------


async def test_the_followers_of_one_conversation_share_one_read_per_wake(
    make_desk: DeskFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    desk = await make_desk(config=NEVER_POLL)
    await _opened(desk)
    reads = _Reads(desk.stores, monkeypatch)
    many = 40

    async with _following(desk.runtime, desk.account_id, desk.conversation_id, many) as followers:
        await reads.reach(many + 1)  # each one's catch-up read, and one shared poll's
        before = reads.count
        turn = await desk.say("Hello")
        items = [await follower.next() for follower in followers]
        reads_per_wake = reads.count - before

    assert {(item.sequence, item.turn.turn_id) for item in items} == {(1, turn.turn_id)}
    assert reads_per_wake == 1
    assert desk.runtime.feed_followers(desk.account_id, desk.conversation_id) == 0


async def test_one_follower_past_the_bound_is_refused_before_it_reads(
    make_desk: DeskFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    bounded = dataclasses.replace(NEVER_POLL, feed_followers_per_conversation=2)
    desk = await make_desk(config=bounded)
    await _opened(desk)
    reads = _Reads(desk.stores, monkeypatch)
    runtime, account, conversation = desk.runtime, desk.account_id, desk.conversation_id

    async with _following(runtime, account, conversation, 2):
        await reads.reach(3)
        before = reads.count
        with pytest.raises(TooManyFollowers):
            await anext(runtime.follow_conversation(account, conversation))
        assert reads.count == before
        assert runtime.feed_followers(account, conversation) == 2
    # the ones that stopped reading made room
    assert await _feed_now(desk) == []


async def test_a_shared_poll_whose_readers_keep_up_keeps_no_turn(
    make_desk: DeskFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    desk = await make_desk(config=NEVER_POLL)
    await _opened(desk)
    reads = _Reads(desk.stores, monkeypatch)
    hub = StreamHub()
    feeds = ConversationFeeds(desk.stores, hub, NEVER_POLL)
    account, conversation = desk.account_id, desk.conversation_id
    followers = [_Follower(feeds.follow(account, conversation, -1, follow=True)) for _ in range(3)]
    await reads.reach(4)  # each one's catch-up read, and the shared poll's

    try:
        for n in range(30):
            turn = await desk.say(f"Note {n}")
            hub.notify_conversation(account, conversation)
            assert {(await f.next()).turn.turn_id for f in followers} == {turn.turn_id}
        kept = feeds.kept(account, conversation)
    finally:
        for follower in followers:
            await follower.stop()

    assert kept == 0


async def test_a_slow_reader_is_kept_what_it_has_not_read_and_reads_it_without_the_store(
    make_desk: DeskFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    desk = await make_desk(config=NEVER_POLL)
    await _opened(desk)
    reads = _Reads(desk.stores, monkeypatch)
    hub = StreamHub()
    feeds = ConversationFeeds(desk.stores, hub, NEVER_POLL)
    account, conversation = desk.account_id, desk.conversation_id
    fast = _Follower(feeds.follow(account, conversation, -1, follow=True))
    slow = feeds.follow(account, conversation, -1, follow=True)
    first = asyncio.ensure_future(anext(slow))
    await reads.reach(3)
    turns = []
    try:
        for n in range(5):
            turns.append(await desk.say(f"Note {n}"))
            hub.notify_conversation(account, conversation)
            assert (await fast.next()).turn == turns[-1]
        kept_for_the_slow_one = feeds.kept(account, conversation)
        before = reads.count
        read = [(await first).turn] + [(await anext(slow)).turn for _ in range(4)]
        after_reading, parked = reads.count, asyncio.ensure_future(anext(slow))
        await asyncio.sleep(0)  # it hands the last one over and waits for more
        kept_after = feeds.kept(account, conversation)
        parked.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await parked
    finally:
        await fast.stop()
        with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
            await slow.aclose()

    assert kept_for_the_slow_one == 5
    assert read == turns and after_reading == before
    assert kept_after == 0


def test_a_refused_reader_is_not_counted_and_one_that_leaves_frees_its_place() -> None:
    """The count both bounds (a turn's stream readers, a conversation's feed readers) use."""
    count = FollowerCount(1, "full")

    with count.counted(("acct_1", "conv_1")):
        with pytest.raises(TooManyFollowers, match="full"), count.counted(("acct_1", "conv_1")):
            pass
        with count.counted(("acct_1", "conv_2")):
            held = (count.reading(("acct_1", "conv_1")), count.reading(("acct_1", "conv_2")))

    assert held == (1, 1)
    assert count.reading(("acct_1", "conv_1")) == 0
    with count.counted(("acct_1", "conv_1")):
        assert count.reading(("acct_1", "conv_1")) == 1


async def test_a_store_failure_reaches_every_follower_and_the_next_reader_starts_anew(
    make_desk: DeskFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    desk = await make_desk(config=NEVER_POLL)
    await _opened(desk)
    reads = _Reads(desk.stores, monkeypatch)

    async with _following(desk.runtime, desk.account_id, desk.conversation_id, 2) as followers:
        await reads.reach(3)
        reads.fail = Unavailable("down")  # the shared poll's read after the wake-up
        turn = await desk.say("Hello")
        done, _ = await asyncio.wait([f.task for f in followers], timeout=WAIT)
        failures = [type(task.exception()) for task in done]

    assert failures == [Unavailable, Unavailable]
    assert desk.runtime.feed_followers(desk.account_id, desk.conversation_id) == 0
    async with _following(desk.runtime, desk.account_id, desk.conversation_id) as (again,):
        assert (await again.next()).turn == turn


async def test_a_reader_that_stops_reading_is_no_longer_counted(desk: DeskHarness) -> None:
    first = await desk.say("Hello")
    feed = desk.runtime.follow_conversation(desk.account_id, desk.conversation_id)

    item = await anext(feed)
    reading = desk.runtime.feed_followers(desk.account_id, desk.conversation_id)
    await feed.aclose()

    assert (item.turn, reading) == (first, 1)
    assert desk.runtime.feed_followers(desk.account_id, desk.conversation_id) == 0


async def test_a_conversation_of_another_account_is_not_found_exactly_like_a_missing_one(
    make_desk: DeskFactory,
) -> None:
    desk = await make_desk(conversation_id="conv_a")
    other = await make_desk(
        stores=desk.stores, clock=desk.clock, ids=desk.ids, account_id="acct_2",
        conversation_id="conv_b",
    )  # fmt: skip
    await other.say("Mine")
    turn = await desk.say("Hello")

    refused = []
    for runtime, account, conversation in (
        (desk.runtime, desk.account_id, "conv_missing"),
        (other.runtime, other.account_id, desk.conversation_id),
    ):
        with pytest.raises(NotFound) as raised:
            await anext(runtime.follow_conversation(account, conversation))
        refused.append((type(raised.value), raised.value.code, str(raised.value)))
    for account, turn_id in ((other.account_id, turn.turn_id), (desk.account_id, "turn_none")):
        with pytest.raises(NotFound) as raised:
            await other.runtime.follow_up_turns(account, turn_id)
        refused.append((type(raised.value), raised.value.code, str(raised.value)))

    assert len(set(refused)) == 1
    assert _ids(await _feed_now(other)) == _ids(await other.runtime.load_conversation(
        other.account_id, other.conversation_id
    ))  # fmt: skip


# --- follow_up_turns ----------------------------------------------------------------------------


async def test_a_turn_that_enqueued_nothing_has_no_follow_up_turns(desk: DeskHarness) -> None:
    turn = await desk.say("Hello")

    assert await desk.runtime.follow_up_turns(desk.account_id, turn.turn_id) == ()


async def test_no_follow_up_turn_is_promised_for_an_answer_the_case_records_nothing_of(
    desk: DeskHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(desk.workflow, "external_answer", lambda request, result: None)
    click_turn, row = await _confirmed(desk)

    promised = await desk.runtime.follow_up_turns(desk.account_id, click_turn)
    await _answered(desk, row)

    assert promised == ()
    assert await desk.runtime.follow_up_turns(desk.account_id, click_turn) == ()
    with pytest.raises(NotFound):
        await desk.runtime.load_turn(
            desk.account_id, follow_up_turn_id(desk.account_id, row.outbox_id, "answer")
        )


async def test_no_follow_up_turn_is_promised_for_an_answer_no_callback_may_record(
    desk: DeskHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer's command is one only a click may run: the completed answer settles the row
    alone, as promised."""
    policy = desk.workflow.policy
    monkeypatch.setattr(
        desk.workflow,
        "policy",
        lambda kind: CommandPolicy.conservative() if kind == ANSWER else policy(kind),
    )
    click_turn, row = await _confirmed(desk)

    promised = await desk.runtime.follow_up_turns(desk.account_id, click_turn)
    await _answered(desk, row)

    assert promised == ()
    assert (await desk.stores.outbox.get(row.outbox_id)).status is OutboxStatus.COMPLETED
    with pytest.raises(NotFound):
        await desk.runtime.load_turn(
            desk.account_id, follow_up_turn_id(desk.account_id, row.outbox_id, "answer")
        )
    assert await desk.runtime.follow_up_turns(desk.account_id, click_turn) == ()


async def test_the_promised_follow_up_turn_is_the_one_written_when_the_row_is_answered(
    desk: DeskHarness,
) -> None:
    click_turn, row = await _confirmed(desk)

    promised = await desk.runtime.follow_up_turns(desk.account_id, click_turn)
    await _answered(desk, row)

    written = [await desk.runtime.load_turn(desk.account_id, turn_id) for turn_id in promised]
    assert [turn.turn_id for turn in written] == list(promised)
    assert all(turn.conversation_id == desk.conversation_id for turn in written)
    assert await desk.runtime.follow_up_turns(desk.account_id, click_turn) == promised
    assert promised[-1] == (await _feed_now(desk))[-1].turn.turn_id
