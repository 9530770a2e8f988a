"""What MemoryStores adds to the contract: the injected clock, order that does not depend on
insertion, writes that leave no trace when they fail, and safety across threads."""

from __future__ import annotations

import asyncio
import threading

import pytest

from turnframe_core.cases import CaseRef
from turnframe_core.commands import CommandEnvelope, InternalPolicy
from turnframe_core.interactions import (
    Interaction,
    InteractionKind,
    InteractionOption,
    InteractionPayload,
    InteractionStatus,
    ResolveClarification,
)
from turnframe_core.replay import FailedOutcome, TurnPhase
from turnframe_core.turn import AssistantTurn, TurnInput, TurnStatus
from turnframe_store import (
    Conflict,
    Corrupt,
    Fresh,
    JournalEntry,
    ManualClock,
    MemoryStores,
    UserTurnRecord,
)

A = "acct_a"
T0 = 1_700_000_000_000


def card(
    interaction_id: str, *, created_at: int = T0, title: str = "Pick", blocking: bool = True
) -> Interaction:
    option = InteractionOption(
        option_id="opt_yes", label="Yes", action=ResolveClarification(answer_key="yes")
    )
    return Interaction.create(
        interaction_id=interaction_id,
        account_id=A,
        conversation_id="conv_1",
        case_ref=CaseRef(workflow="sample.case", case_id="case-1", expected_revision=1),
        kind=InteractionKind.SINGLE_SELECT,
        payload=InteractionPayload(title=title, options=(option,)),
        created_by_turn="turn_1",
        created_at=created_at,
        blocking=blocking,
    )


def entry(command_id: str = "cmd_1") -> JournalEntry:
    envelope = CommandEnvelope.build(
        command_id=command_id,
        turn_id="turn_1",
        account_id=A,
        case_ref=CaseRef(workflow="sample.case", case_id="case-1", expected_revision=1),
        origin=InternalPolicy(policy_key="test"),
        command_type="sample.note",
    )
    return JournalEntry.from_envelope(envelope, now=T0)


async def test_lifecycle_times_come_from_the_injected_clock() -> None:
    clock = ManualClock(T0)
    stores = MemoryStores(clock=clock)
    await stores.conversations.ensure_conversation(A, "conv_1")
    await stores.conversations.append_user_turn(
        UserTurnRecord(
            account_id=A,
            conversation_id="conv_1",
            turn_id="turn_1",
            received_at=T0,
            input=TurnInput(account_id=A, conversation_id="conv_1", text="hi"),
        )
    )
    await stores.journal.begin(entry())

    clock.advance(250)
    marker = await stores.conversations.set_phase(A, "turn_1", TurnPhase.EXECUTING)
    clock.advance(250)
    settled = await stores.journal.complete(A, "cmd_1", FailedOutcome(code="sample.failed"))

    assert marker.updated_at == T0 + 250
    assert settled.completed_at == T0 + 500


async def test_lists_do_not_depend_on_the_order_of_insertion() -> None:
    cards = [card(f"int_{n}", created_at=T0 + n % 3, blocking=False) for n in range(9)]
    forward, backward = MemoryStores(), MemoryStores()

    for item in cards:
        await forward.interactions.insert(item)
    for item in reversed(cards):
        await backward.interactions.insert(item)

    assert await forward.interactions.open_for_conversation(
        A, "conv_1"
    ) == await backward.interactions.open_for_conversation(A, "conv_1")


async def test_a_write_that_fails_halfway_leaves_no_trace() -> None:
    stores = MemoryStores()
    await stores.interactions.insert(card("int_old"))
    await stores.interactions.insert(card("int_taken", blocking=False))

    # The replacement invalidates int_old, then fails to insert under a stored id.
    with pytest.raises(Conflict):
        await stores.interactions.insert_replacing_blocking(card("int_taken", title="Other"))

    assert (await stores.interactions.get(A, "int_old")).status is InteractionStatus.ACTIVE
    with pytest.raises(Conflict):
        await stores.interactions.insert(card("int_new"))


def test_event_loops_on_two_threads_admit_a_key_once() -> None:
    stores = MemoryStores()
    admissions: list[object] = []
    start = threading.Barrier(2)

    def worker() -> None:
        async def run() -> list[object]:
            start.wait()
            return list(await asyncio.gather(*(stores.journal.begin(entry()) for _ in range(50))))

        admissions.extend(asyncio.run(run()))

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sum(isinstance(a, Fresh) for a in admissions) == 1
    assert len(admissions) == 100


def test_a_manual_clock_never_moves_backward() -> None:
    clock = ManualClock(T0)

    with pytest.raises(ValueError):
        clock.advance(-1)
    with pytest.raises(ValueError):
        clock.set(T0 - 1)
    assert clock() == T0


async def test_a_stored_turn_that_no_longer_reloads_byte_for_byte_is_corrupt() -> None:
    stores = MemoryStores()
    await stores.conversations.ensure_conversation(A, "conv_1")
    await stores.conversations.append_user_turn(
        UserTurnRecord(
            account_id=A,
            conversation_id="conv_1",
            turn_id="turn_1",
            received_at=T0,
            input=TurnInput(account_id=A, conversation_id="conv_1", text="hi"),
        )
    )
    started = AssistantTurn.begin(
        turn_id="turn_1", conversation_id="conv_1", account_id=A, locale="en", created_at=T0
    )
    await stores.conversations.append_assistant_turn(
        A, started.finish(TurnStatus.COMPLETED, at=T0 + 1)
    )
    key = (A, "turn_1")
    stores.engine.t.assistant_turns[key] = stores.engine.t.assistant_turns[key].replace(",", ", ")

    with pytest.raises(Corrupt):
        await stores.conversations.get_assistant_turn(A, "turn_1")
