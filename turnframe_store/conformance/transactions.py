"""Conformance checks: `Stores.transaction()`, the unit of work a turn's durable points use."""

from __future__ import annotations

import asyncio
import contextlib

from turnframe_store.bundle import Stores
from turnframe_store.conformance._data import _A, _card, _case, _start_turn, _user_turn
from turnframe_store.conformance._expect import _equal, _refused, _true
from turnframe_store.conformance._runner import _check
from turnframe_store.errors import Conflict, NotFound, StoreError


class _Abandon(Exception):
    """Raised by a check to abandon its transaction."""


@_check
async def check_a_transaction_commits_its_writes_together_and_sees_them_inside(
    stores: Stores,
) -> None:
    async with stores.transaction() as tx:
        await _start_turn(tx, "turn_1")
        _equal(
            (await tx.conversations.get_user_turn(_A, "turn_1")).turn_id,
            "turn_1",
            "the transaction's own write, read inside it",
        )
        await tx.interactions.insert(_card("int_1"))
    _equal(
        (await stores.conversations.get_user_turn(_A, "turn_1")).turn_id,
        "turn_1",
        "the user turn after the commit",
    )
    _equal(
        (await stores.interactions.get(_A, "int_1")).interaction_id,
        "int_1",
        "the card after the commit",
    )


@_check
async def check_a_transaction_whose_block_raises_leaves_nothing(stores: Stores) -> None:
    await stores.conversations.ensure_conversation(_A, "conv_1")
    try:
        async with stores.transaction() as tx:
            await tx.conversations.append_user_turn(_user_turn("turn_1"))
            await tx.interactions.insert(_card("int_1"))
            raise _Abandon()
    except _Abandon:
        pass
    await _refused(NotFound, stores.conversations.get_user_turn(_A, "turn_1"), "the user turn")
    await _refused(NotFound, stores.interactions.get(_A, "int_1"), "the card")
    await _start_turn(stores, "turn_2")  # the store is usable afterwards


@_check
async def check_a_failed_call_dooms_its_transaction_even_when_caught(stores: Stores) -> None:
    await _start_turn(stores, "turn_1")

    async def doomed() -> None:
        async with stores.transaction() as tx:
            await tx.interactions.insert(_card("int_1"))
            with contextlib.suppress(Conflict):  # the turn is stored already
                await tx.conversations.append_user_turn(_user_turn("turn_1"))
            await _refused(
                Conflict,
                tx.interactions.insert(_card("int_2", case=_case("case-2"))),
                "a call after the failed one",
            )

    await _refused(Conflict, doomed(), "the end of a transaction a failed call doomed")
    await _refused(NotFound, stores.interactions.get(_A, "int_1"), "a card written before it")
    await _refused(NotFound, stores.interactions.get(_A, "int_2"), "a card written after it")


@_check
async def check_nobody_else_sees_an_open_transactions_writes(stores: Stores) -> None:
    await stores.conversations.ensure_conversation(_A, "conv_1")
    seen_before_commit: list[bool] = []

    async def look() -> None:
        try:
            await stores.conversations.get_user_turn(_A, "turn_1")
        except NotFound:
            seen_before_commit.append(False)
        else:
            seen_before_commit.append(not committed.is_set())

    committed = asyncio.Event()
    async with stores.transaction() as tx:
        await tx.conversations.append_user_turn(_user_turn("turn_1"))
        reader = asyncio.ensure_future(look())
        await asyncio.sleep(0.05)  # the reader either answers now, or waits for the commit
        committed.set()
    await asyncio.wait_for(reader, timeout=10)
    _true(seen_before_commit == [False], "no reader saw the turn before the commit")


@_check
async def check_a_failed_savepoint_undoes_only_its_own_writes(stores: Stores) -> None:
    await _start_turn(stores, "turn_1")
    async with stores.transaction() as tx:
        await tx.interactions.insert(_card("int_1"))
        with contextlib.suppress(Conflict):
            async with tx.savepoint():
                await tx.interactions.insert(_card("int_2", case=_case("case-2")))
                await tx.conversations.append_user_turn(_user_turn("turn_1"))  # stored already
        with contextlib.suppress(_Abandon):
            async with tx.savepoint():
                await tx.interactions.insert(_card("int_3", case=_case("case-3")))
                raise _Abandon()
        async with tx.savepoint():
            await tx.interactions.insert(_card("int_4", case=_case("case-4")))
        for kept in ("int_1", "int_4"):
            _equal((await tx.interactions.get(_A, kept)).interaction_id, kept, "a card kept")
        for undone in ("int_2", "int_3"):
            await _refused(NotFound, tx.interactions.get(_A, undone), "a card a savepoint undid")


@_check
async def check_a_snapshot_reads_one_moment_and_writes_nothing(stores: Stores) -> None:
    await _start_turn(stores, "turn_1")
    async with stores.snapshot() as view:
        _equal(
            [t.turn_id for t in await view.conversations.list_turns(_A, "conv_1")],
            ["turn_1"],
            "the turns a snapshot reads first",
        )
        await _start_turn(stores, "turn_2")  # committed while the snapshot reads
        await stores.interactions.insert(_card("int_1"))
        _equal(
            [t.turn_id for t in await view.conversations.list_turns(_A, "conv_1")],
            ["turn_1"],
            "the turns the same snapshot reads after a commit",
        )
        await _refused(NotFound, view.interactions.get(_A, "int_1"), "a card committed since")
        await _refused(StoreError, view.interactions.insert(_card("int_2")), "a write through it")
    _equal(
        [t.turn_id for t in await stores.conversations.list_turns(_A, "conv_1")],
        ["turn_1", "turn_2"],
        "the turns after the snapshot",
    )
    await _refused(NotFound, stores.interactions.get(_A, "int_2"), "a card written through it")
