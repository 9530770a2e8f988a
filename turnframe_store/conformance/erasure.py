"""Conformance checks: erasing a turn (`CommitStore.erase_turn`, decision 0032)."""

from __future__ import annotations

from turnframe_core.erasure import ERASED
from turnframe_core.replay import SEALED_DIGEST_SCHEME, CommittedOutcome, TurnPhase
from turnframe_store import builders as build
from turnframe_store.builders import ACCOUNT_A, ACCOUNT_B, T0
from turnframe_store.bundle import Stores
from turnframe_store.conformance.data import start_turn
from turnframe_store.conformance.expect import equal, refused
from turnframe_store.conformance.runner import check
from turnframe_store.errors import NotFound
from turnframe_store.records import JournalStatus

PERSON = {"name": "Ada Lovelace", "seats": 2}


async def _final_turn(stores: Stores, turn: str, phase: TurnPhase, at: int = T0 + 10) -> None:
    """A turn whose user turn, reply, command, event and record hold a person's words."""
    await start_turn(stores, turn)
    command = f"cmd_{turn}"
    await stores.journal.begin(build.journal_entry(command, turn=turn, payload=PERSON))
    await stores.journal.mark_executing(ACCOUNT_A, command)
    event = build.event(f"evt_{turn}", command=command, payload=PERSON)
    [appended] = await stores.events.append(ACCOUNT_A, [event])
    await stores.journal.complete(
        ACCOUNT_A, command, CommittedOutcome(new_revision=1, event_ids=(appended.event_id,))
    )
    record = build.replay_record(turn).model_copy(
        update={"digest_scheme": SEALED_DIGEST_SCHEME, "understanding": {"said": "Ada Lovelace"}}
    )
    final = record.advanced(phase, at=at, event_ids=(appended.event_id,))
    if phase.is_terminal:
        await stores.conversations.append_assistant_turn(
            ACCOUNT_A, build.assistant_turn(turn, text="Ada Lovelace is set")
        )
    await stores.replay.put(final)


@check
async def check_erasing_a_turn_rewrites_its_words_and_keeps_its_digests(stores: Stores) -> None:
    await _final_turn(stores, "turn_1", TurnPhase.DELIVERED)
    before = await stores.replay.get(ACCOUNT_A, "turn_1")
    chain = await stores.replay.chain(ACCOUNT_A, "conv_1")

    erased = await stores.commits.erase_turn(ACCOUNT_A, "turn_1")

    equal((erased.erased, erased.already, erased.kept), (True, False, ()), "the erasure")
    user = await stores.conversations.get_user_turn(ACCOUNT_A, "turn_1")
    equal(user.input.text, ERASED, "the user's words")
    reply = await stores.conversations.get_assistant_turn(ACCOUNT_A, "turn_1")
    equal([getattr(b, "text", None) for b in reply.blocks], [ERASED], "the reply's words")
    record = await stores.replay.get(ACCOUNT_A, "turn_1")
    equal((record.understanding, record.input.text), (None, ERASED), "the record's words")
    equal(record.digest(), before.digest(), "the record's digest")
    equal(await stores.replay.chain(ACCOUNT_A, "conv_1"), chain, "the audit chain")
    entry = await stores.journal.get(ACCOUNT_A, "cmd_turn_1")
    equal((entry.payload, entry.status), ({"name": ERASED, "seats": None}, JournalStatus.COMMITTED),
          "the command's arguments")  # fmt: skip
    [event] = await stores.events.get_by_ids(ACCOUNT_A, ["evt_turn_1"])
    equal((event.payload, event.event_type), ({"name": ERASED, "seats": None}, "conformance.noted"),
          "the event's values")  # fmt: skip
    again = await stores.commits.erase_turn(ACCOUNT_A, "turn_1")
    equal((again.erased, again.already), (True, True), "erasing again")
    equal(await stores.replay.get(ACCOUNT_A, "turn_1"), record, "the record erased again")


@check
async def check_a_running_turn_keeps_its_words_and_a_foreign_one_is_not_found(
    stores: Stores,
) -> None:
    await _final_turn(stores, "turn_1", TurnPhase.COMMITTED)
    before = await stores.conversations.get_user_turn(ACCOUNT_A, "turn_1")

    running = await stores.commits.erase_turn(ACCOUNT_A, "turn_1")

    equal((running.erased, running.kept), (False, ("turn: still running",)), "a running turn")
    equal(await stores.conversations.get_user_turn(ACCOUNT_A, "turn_1"), before, "its words")
    await refused(NotFound, stores.commits.erase_turn(ACCOUNT_B, "turn_1"), "another account's")
    await refused(NotFound, stores.commits.erase_turn(ACCOUNT_A, "turn_9"), "a missing turn")


@check
async def check_the_retention_sweep_lists_final_turns_still_holding_words_oldest_first(
    stores: Stores,
) -> None:
    await _final_turn(stores, "turn_2", TurnPhase.DELIVERED, at=T0 + 20)
    await _final_turn(stores, "turn_1", TurnPhase.FAILED, at=T0 + 10)
    await _final_turn(stores, "turn_3", TurnPhase.COMMITTED, at=T0 + 5)  # still running
    replay = stores.replay

    listed = await replay.unerased_before(T0 + 1_000, 10)

    equal(listed, ((ACCOUNT_A, "turn_1"), (ACCOUNT_A, "turn_2")), "final turns, oldest first")
    equal(await replay.unerased_before(T0 + 20, 10), ((ACCOUNT_A, "turn_1"),), "the cutoff")
    equal(await replay.unerased_before(T0 + 1_000, 1), ((ACCOUNT_A, "turn_1"),), "the limit")
    await stores.commits.erase_turn(ACCOUNT_A, "turn_1")
    equal(
        await replay.unerased_before(T0 + 1_000, 10),
        ((ACCOUNT_A, "turn_2"),),
        "an erased turn is passed by",
    )
