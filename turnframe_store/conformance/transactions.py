"""Conformance checks: `Stores.transaction()`, the unit of work a turn's durable points use."""

from __future__ import annotations

import asyncio
import contextlib

from turnframe_store import builders as build
from turnframe_store.builders import ACCOUNT_A, T0
from turnframe_store.bundle import Stores
from turnframe_store.conformance.data import start_turn
from turnframe_store.conformance.expect import equal, refused, true
from turnframe_store.conformance.runner import check
from turnframe_store.errors import Conflict, NotFound, StoreError


class _Abandon(Exception):
    """Raised by a check to abandon its transaction."""


@check
async def check_a_transaction_commits_its_writes_together_and_sees_them_inside(
    stores: Stores,
) -> None:
    async with stores.transaction() as tx:
        await start_turn(tx, "turn_1")
        equal(
            (await tx.conversations.get_user_turn(ACCOUNT_A, "turn_1")).turn_id,
            "turn_1",
            "the transaction's own write, read inside it",
        )
        await tx.interactions.insert(build.card("int_1"))
        await tx.timers.schedule(build.timer("tmr_1"))
        equal(
            (await tx.timers.get(ACCOUNT_A, "tmr_1")).timer_id,
            "tmr_1",
            "the transaction's own timer, read inside it",
        )
    equal(
        (await stores.conversations.get_user_turn(ACCOUNT_A, "turn_1")).turn_id,
        "turn_1",
        "the user turn after the commit",
    )
    equal(
        (await stores.timers.get(ACCOUNT_A, "tmr_1")).timer_id,
        "tmr_1",
        "the timer after the commit",
    )
    equal(
        (await stores.interactions.get(ACCOUNT_A, "int_1")).interaction_id,
        "int_1",
        "the card after the commit",
    )


@check
async def check_a_transaction_whose_block_raises_leaves_nothing(stores: Stores) -> None:
    await stores.conversations.ensure_conversation(ACCOUNT_A, "conv_1")
    try:
        async with stores.transaction() as tx:
            await tx.conversations.append_user_turn(build.user_turn("turn_1"))
            await tx.interactions.insert(build.card("int_1"))
            await tx.timers.schedule(build.timer("tmr_1"))
            raise _Abandon()
    except _Abandon:
        pass
    await refused(
        NotFound, stores.conversations.get_user_turn(ACCOUNT_A, "turn_1"), "the user turn"
    )
    await refused(NotFound, stores.interactions.get(ACCOUNT_A, "int_1"), "the card")
    await refused(NotFound, stores.timers.get(ACCOUNT_A, "tmr_1"), "the timer")
    equal(await stores.timers.claim_due(T0, 1000, 10, "worker-1"), (), "a timer to claim")
    await start_turn(stores, "turn_2")  # the store is usable afterwards


@check
async def check_a_failed_call_dooms_its_transaction_even_when_caught(stores: Stores) -> None:
    await start_turn(stores, "turn_1")

    async def doomed() -> None:
        async with stores.transaction() as tx:
            await tx.interactions.insert(build.card("int_1"))
            with contextlib.suppress(Conflict):  # the turn is stored already
                await tx.conversations.append_user_turn(build.user_turn("turn_1"))
            await refused(
                Conflict,
                tx.interactions.insert(build.card("int_2", case=build.case("case-2"))),
                "a call after the failed one",
            )

    await refused(Conflict, doomed(), "the end of a transaction a failed call doomed")
    await refused(NotFound, stores.interactions.get(ACCOUNT_A, "int_1"), "a card written before it")
    await refused(NotFound, stores.interactions.get(ACCOUNT_A, "int_2"), "a card written after it")


@check
async def check_nobody_else_sees_an_open_transactions_writes(stores: Stores) -> None:
    await stores.conversations.ensure_conversation(ACCOUNT_A, "conv_1")
    seen_before_commit: list[bool] = []

    async def look() -> None:
        try:
            await stores.conversations.get_user_turn(ACCOUNT_A, "turn_1")
        except NotFound:
            seen_before_commit.append(False)
        else:
            seen_before_commit.append(not committed.is_set())

    committed = asyncio.Event()
    async with stores.transaction() as tx:
        await tx.conversations.append_user_turn(build.user_turn("turn_1"))
        reader = asyncio.ensure_future(look())
        await asyncio.sleep(0.05)  # the reader either answers now, or waits for the commit
        committed.set()
    await asyncio.wait_for(reader, timeout=10)
    true(seen_before_commit == [False], "no reader saw the turn before the commit")


@check
async def check_a_failed_savepoint_undoes_only_its_own_writes(stores: Stores) -> None:
    await start_turn(stores, "turn_1")
    async with stores.transaction() as tx:
        await tx.interactions.insert(build.card("int_1"))
        with contextlib.suppress(Conflict):
            async with tx.savepoint():
                await tx.interactions.insert(build.card("int_2", case=build.case("case-2")))
                await tx.conversations.append_user_turn(build.user_turn("turn_1"))  # stored already
        with contextlib.suppress(_Abandon):
            async with tx.savepoint():
                await tx.interactions.insert(build.card("int_3", case=build.case("case-3")))
                raise _Abandon()
        async with tx.savepoint():
            await tx.interactions.insert(build.card("int_4", case=build.case("case-4")))
        for kept in ("int_1", "int_4"):
            equal((await tx.interactions.get(ACCOUNT_A, kept)).interaction_id, kept, "a card kept")
        for undone in ("int_2", "int_3"):
            await refused(
                NotFound, tx.interactions.get(ACCOUNT_A, undone), "a card a savepoint undid"
            )


@check
async def check_a_snapshot_reads_one_moment_and_writes_nothing(stores: Stores) -> None:
    await start_turn(stores, "turn_1")
    async with stores.snapshot() as view:
        equal(
            [t.turn_id for t in await view.conversations.list_turns(ACCOUNT_A, "conv_1")],
            ["turn_1"],
            "the turns a snapshot reads first",
        )
        await start_turn(stores, "turn_2")  # committed while the snapshot reads
        await stores.interactions.insert(build.card("int_1"))
        equal(
            [t.turn_id for t in await view.conversations.list_turns(ACCOUNT_A, "conv_1")],
            ["turn_1"],
            "the turns the same snapshot reads after a commit",
        )
        await refused(NotFound, view.interactions.get(ACCOUNT_A, "int_1"), "a card committed since")
        await refused(
            StoreError, view.interactions.insert(build.card("int_2")), "a write through it"
        )
    equal(
        [t.turn_id for t in await stores.conversations.list_turns(ACCOUNT_A, "conv_1")],
        ["turn_1", "turn_2"],
        "the turns after the snapshot",
    )
    await refused(
        NotFound, stores.interactions.get(ACCOUNT_A, "int_2"), "a card written through it"
    )
