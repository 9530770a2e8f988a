"""Conformance checks: the commit bundle, all-or-nothing in its normative order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from turnframe_core.interactions import InteractionStatus
from turnframe_core.replay import CommittedOutcome, FailedOutcome, ReplayRecord, TurnPhase
from turnframe_core.stream import TurnStep
from turnframe_store import builders as build
from turnframe_store.builders import ACCOUNT_A, ACCOUNT_B, T0, WORKFLOW
from turnframe_store.bundle import Stores
from turnframe_store.conformance.data import card_status, ids, start_turn
from turnframe_store.conformance.expect import equal, refused, true
from turnframe_store.conformance.runner import check
from turnframe_store.errors import Conflict, InvalidRecord, NotFound, StoreError
from turnframe_store.records import (
    CaseInvalidation,
    CommitBundle,
    EventCursor,
    InteractionFinish,
    JournalCompletion,
    JournalStatus,
)

_AWAITING = JournalStatus.AWAITING_CONFIRMATION


@dataclass(frozen=True)
class _BundleWorld:
    account: str
    bundle: CommitBundle
    replay_before: ReplayRecord
    phase_before: TurnPhase


async def _bundle_world(
    stores: Stores, account: str, tag: str, *, final_replay: bool = False, final_phase: bool = False
) -> _BundleWorld:
    """A turn ready to commit: a command executing, a card resolving, a stale card, and the
    records a spoiled item can collide with (a settled command, an event, an idle card, a row)."""
    await start_turn(stores, "turn_1", account=account)
    await start_turn(stores, "turn_2", account=account)
    journal, cards = stores.journal, stores.interactions
    await journal.begin(build.journal_entry("cmd_0", account=account, turn="turn_1"))
    await journal.complete(account, "cmd_0", CommittedOutcome(new_revision=1, event_ids=()))
    await journal.begin(build.journal_entry("cmd_1", account=account, turn="turn_2"))
    await journal.mark_executing(account, "cmd_1")
    await stores.events.append(account, [build.event("evt_0", account=account)])
    await cards.insert(build.card("int_stale", account=account, case=build.case("case-1", 1)))
    await cards.insert(build.card("int_answered", account=account, case=build.case("case-2", 1)))
    await cards.begin_resolution(account, "int_answered", "opt_yes")
    await cards.insert(build.card("int_idle", account=account, case=build.case("case-3", 1)))
    await stores.outbox.enqueue(build.outbox_row(f"obx_{tag}_0", key=f"key-{tag}-0"))
    replay_before = build.replay_record("turn_2", account=account)
    if final_replay:
        replay_before = replay_before.advanced(TurnPhase.FAILED, at=T0 + 1)
    await stores.replay.put(replay_before)
    phase_before = TurnPhase.FAILED if final_phase else TurnPhase.RECEIVED
    await stores.conversations.set_phase(account, "turn_2", phase_before)
    await stores.conversations.append_stream_events(account, [_progress(1)])
    new_revision = 2
    bundle = CommitBundle(
        account_id=account,
        conversation_id="conv_1",
        turn_id="turn_2",
        journal_completions=(
            JournalCompletion(
                command_id="cmd_1",
                outcome=CommittedOutcome(new_revision=new_revision, event_ids=("evt_1", "evt_2")),
            ),
        ),
        events=(
            build.event("evt_1", account=account, revision=new_revision),
            build.event("evt_2", account=account, revision=new_revision),
        ),
        interaction_finishes=(
            InteractionFinish(
                interaction_id="int_answered",
                status=InteractionStatus.RESOLVED,
                option_id="opt_yes",
                event_ids=("evt_1",),
            ),
        ),
        invalidations=(
            CaseInvalidation(workflow=WORKFLOW, case_id="case-1", current_revision=new_revision),
        ),
        # Each new blocking card fits only because the stages before it freed its case's slot.
        interaction_inserts=(
            build.card("int_next_1", account=account, case=build.case("case-1", 2), turn="turn_2"),
            build.card("int_next_2", account=account, case=build.case("case-2", 2), turn="turn_2"),
        ),
        outbox=(build.outbox_row(f"obx_{tag}_1", key=f"key-{tag}-1"),),
        replay=build.replay_record("turn_2", account=account).advanced(
            TurnPhase.COMMITTED, at=T0 + 2, event_ids=("evt_1", "evt_2")
        ),
        phase=TurnPhase.COMMITTED,
    )
    return _BundleWorld(account, bundle, replay_before, phase_before)


def _progress(sequence: int) -> TurnStep:
    return TurnStep(turn_id="turn_2", sequence=sequence, at=T0, step="execute")


@check
async def check_a_commit_bundle_applies_its_items_in_the_normative_order(stores: Stores) -> None:
    world = await _bundle_world(stores, ACCOUNT_A, "a")
    bundle = world.bundle
    result = await stores.commits.commit(bundle)
    equal(ids(result.events, "event_id"), ["evt_1", "evt_2"], "the committed events")
    sequences = [e.sequence or 0 for e in result.events]
    true(0 < sequences[0] < sequences[1], f"sequences assigned in order: {sequences}")
    equal(result.invalidated, ("int_stale",), "the invalidated cards")
    entry = await stores.journal.get(ACCOUNT_A, "cmd_1")
    equal(
        (entry.status, entry.outcome),
        (JournalStatus.COMMITTED, bundle.journal_completions[0].outcome),
        "the completed command",
    )
    equal(
        await stores.events.get_by_ids(ACCOUNT_A, ["evt_1", "evt_2"]), result.events, "the ledger"
    )
    answered = await stores.interactions.get(ACCOUNT_A, "int_answered")
    equal(
        (answered.status, answered.resolution_event_ids),
        (InteractionStatus.RESOLVED, ("evt_1",)),
        "the answered card",
    )
    statuses = {
        card_id: await card_status(stores, ACCOUNT_A, card_id)
        for card_id in ("int_stale", "int_next_1", "int_next_2", "int_idle")
    }
    equal(
        statuses,
        {
            "int_stale": InteractionStatus.INVALIDATED,
            "int_next_1": InteractionStatus.ACTIVE,
            "int_next_2": InteractionStatus.ACTIVE,
            "int_idle": InteractionStatus.ACTIVE,
        },
        "the cards",
    )
    equal(await stores.outbox.get("obx_a_1"), bundle.outbox[0], "the outbox row")
    equal(await stores.replay.get(ACCOUNT_A, "turn_2"), bundle.replay, "the replay record")
    equal(
        (await stores.conversations.get_phase(ACCOUNT_A, "turn_2")).phase,
        TurnPhase.COMMITTED,
        "the phase marker",
    )


_SPOILS: Final[tuple[tuple[str, type[StoreError]], ...]] = (
    ("a completion that settles a command differently (stage 1)", Conflict),
    ("a completion of an unknown command (stage 1)", NotFound),
    ("an event id already in the ledger (stage 2)", Conflict),
    ("a finish of a card nobody is resolving (stage 3)", Conflict),
    ("a second blocking card for a case (stage 5)", Conflict),
    ("an outbox row already enqueued (stage 6)", Conflict),
    ("a replay record that changes a final one (stage 7)", Conflict),
    ("a phase that leaves a final phase (stage 8)", Conflict),
    ("stream events that leave a gap in the turn's log (stage 9)", Conflict),
    ("an event of another account (validation)", InvalidRecord),
)


def _spoiled(world: _BundleWorld, spoil: str, tag: str) -> CommitBundle:
    bundle, account = world.bundle, world.account
    if "settles a command differently" in spoil:
        extra = JournalCompletion(command_id="cmd_0", outcome=FailedOutcome(code="conformance.x"))
        return bundle.model_copy(
            update={"journal_completions": (*bundle.journal_completions, extra)}
        )
    if "unknown command" in spoil:
        extra = JournalCompletion(command_id="cmd_missing", outcome=FailedOutcome(code="x.y"))
        return bundle.model_copy(
            update={"journal_completions": (*bundle.journal_completions, extra)}
        )
    if "already in the ledger" in spoil:
        duplicate = build.event("evt_0", account=account)
        return bundle.model_copy(update={"events": (*bundle.events, duplicate)})
    if "nobody is resolving" in spoil:
        finish = InteractionFinish(
            interaction_id="int_idle", status=InteractionStatus.RESOLVED, option_id="opt_yes"
        )
        return bundle.model_copy(
            update={"interaction_finishes": (*bundle.interaction_finishes, finish)}
        )
    if "second blocking card" in spoil:
        extra_card = build.card(
            "int_extra", account=account, case=build.case("case-3", 1), turn="turn_2"
        )
        return bundle.model_copy(
            update={"interaction_inserts": (*bundle.interaction_inserts, extra_card)}
        )
    if "outbox row already enqueued" in spoil:
        duplicate_row = build.outbox_row(f"obx_{tag}_9", key=f"key-{tag}-0")
        return bundle.model_copy(update={"outbox": (*bundle.outbox, duplicate_row)})
    if "gap in the turn's log" in spoil:
        return bundle.model_copy(update={"stream_events": (_progress(3), _progress(4))})
    if "another account" in spoil:
        foreign = build.event("evt_9", account=ACCOUNT_B)
        return bundle.model_copy(update={"events": (*bundle.events, foreign)})
    return bundle  # the replay and phase spoils live in the world: its record/phase is final


@check
async def check_a_commit_bundle_with_an_invalid_item_writes_nothing(stores: Stores) -> None:
    for number, (spoil, error) in enumerate(_SPOILS):
        account, tag = f"acct_spoil_{number}", f"s{number}"
        world = await _bundle_world(
            stores,
            account,
            tag,
            final_replay="replay record" in spoil,
            final_phase="final phase" in spoil,
        )
        await refused(error, stores.commits.commit(_spoiled(world, spoil, tag)), spoil)
        after = f"after a bundle with {spoil}"
        entry = await stores.journal.get(account, "cmd_1")
        equal(
            (entry.status, entry.outcome),
            (JournalStatus.EXECUTING, None),
            f"the executing command {after}",
        )
        settled = await stores.journal.get(account, "cmd_0")
        equal(settled.outcome, CommittedOutcome(new_revision=1, event_ids=()), f"cmd_0 {after}")
        page = await stores.events.read_from(account, EventCursor.START, 100)
        equal(ids(page.events, "event_id"), ["evt_0"], f"the ledger {after}")
        statuses = {
            card_id: await card_status(stores, account, card_id)
            for card_id in ("int_stale", "int_answered", "int_idle")
        }
        equal(
            statuses,
            {
                "int_stale": InteractionStatus.ACTIVE,
                "int_answered": InteractionStatus.RESOLVING,
                "int_idle": InteractionStatus.ACTIVE,
            },
            f"the cards {after}",
        )
        for card_id in ("int_next_1", "int_next_2", "int_extra"):
            await refused(NotFound, stores.interactions.get(account, card_id), f"{card_id} {after}")
        await refused(NotFound, stores.outbox.get(f"obx_{tag}_1"), f"the new row {after}")
        equal(
            await stores.replay.get(account, "turn_2"),
            world.replay_before,
            f"the replay record {after}",
        )
        equal(
            (await stores.conversations.get_phase(account, "turn_2")).phase,
            world.phase_before,
            f"the phase {after}",
        )
        equal(
            await stores.conversations.stream_events(account, "turn_2", 0, 100),
            (_progress(1),),
            f"the stream log {after}",
        )


@check
async def check_each_bundle_item_is_judged_on_the_state_its_own_stage_left(stores: Stores) -> None:
    """A repeated finish is accepted on the card as it stood at the finish stage, even when a
    later stage of the same bundle (an invalidation) moves that card."""
    await start_turn(stores, "turn_1")
    await stores.interactions.insert(build.card("int_1", case=build.case("case-1", 1)))
    bundle = CommitBundle(
        account_id=ACCOUNT_A,
        conversation_id="conv_1",
        turn_id="turn_1",
        interaction_finishes=(
            InteractionFinish(interaction_id="int_1", status=InteractionStatus.ACTIVE),
        ),
        invalidations=(CaseInvalidation(workflow=WORKFLOW, case_id="case-1", current_revision=4),),
    )
    result = await stores.commits.commit(bundle)
    equal(result.invalidated, ("int_1",), "the cards the later invalidation stage moved")
    equal(await card_status(stores, ACCOUNT_A, "int_1"), InteractionStatus.INVALIDATED, "the card")


@check
async def check_a_commit_bundle_accepts_a_turn_and_journals_its_commands_once(
    stores: Stores,
) -> None:
    await stores.conversations.ensure_conversation(ACCOUNT_A, "conv_1")
    await start_turn(stores, "turn_0")
    await stores.journal.begin(build.journal_entry("cmd_waiting", turn="turn_0", status=_AWAITING))
    bundle = CommitBundle(
        account_id=ACCOUNT_A,
        conversation_id="conv_2",
        turn_id="turn_1",
        user_turn=build.user_turn("turn_1", conversation="conv_2"),
        journal_admissions=(build.journal_entry("cmd_1"), build.journal_entry("cmd_2")),
        journal_starts=("cmd_1", "cmd_2", "cmd_waiting"),
        replay=build.replay_record("turn_1", conversation="conv_2", phase=TurnPhase.EXECUTING),
        phase=TurnPhase.EXECUTING,
    )
    result = await stores.commits.commit(bundle)
    equal([type(a).__name__ for a in result.admissions], ["Fresh", "Fresh"], "the admissions")
    equal(
        (await stores.conversations.get_conversation(ACCOUNT_A, "conv_2")).conversation_id,
        "conv_2",
        "the conversation the bundle created",
    )
    equal(
        (await stores.conversations.get_user_turn(ACCOUNT_A, "turn_1")).input.text,
        "hello",
        "the accepted user turn",
    )
    equal(
        (await stores.conversations.get_phase(ACCOUNT_A, "turn_1")).phase,
        TurnPhase.EXECUTING,
        "the marker after the bundle",
    )
    for command in ("cmd_1", "cmd_2", "cmd_waiting"):
        equal(
            (await stores.journal.get(ACCOUNT_A, command)).status,
            JournalStatus.EXECUTING,
            f"{command} after the bundle",
        )
    again = bundle.model_copy(
        update={
            "turn_id": "turn_9",
            "user_turn": build.user_turn("turn_1", conversation="conv_2").model_copy(
                update={"turn_id": "turn_1"}
            ),
            "journal_admissions": (),
            "journal_starts": (),
            "replay": None,
            "phase": None,
        }
    )
    await refused(InvalidRecord, stores.commits.commit(again), "a user turn of another turn")
    repeat = CommitBundle(
        account_id=ACCOUNT_A,
        conversation_id="conv_2",
        turn_id="turn_1",
        user_turn=build.user_turn("turn_1", conversation="conv_2"),
        journal_admissions=(build.journal_entry("cmd_3"),),
    )
    await refused(Conflict, stores.commits.commit(repeat), "the same user turn again")
    await refused(
        NotFound, stores.journal.get(ACCOUNT_A, "cmd_3"), "a command of the refused bundle"
    )


@check
async def check_a_commit_bundle_stores_the_assistant_turn_once(stores: Stores) -> None:
    await start_turn(stores, "turn_1")
    turn = build.assistant_turn("turn_1")
    bundle = CommitBundle(
        account_id=ACCOUNT_A,
        conversation_id="conv_1",
        turn_id="turn_1",
        assistant_turn=turn,
        replay=build.replay_record("turn_1", phase=TurnPhase.DELIVERED),
        phase=TurnPhase.DELIVERED,
    )
    await stores.commits.commit(bundle)
    loaded = await stores.conversations.get_assistant_turn(ACCOUNT_A, "turn_1")
    equal(loaded.to_stored_json(), turn.to_stored_json(), "the stored turn's bytes")
    equal(
        (await stores.conversations.get_phase(ACCOUNT_A, "turn_1")).phase,
        TurnPhase.DELIVERED,
        "the marker after the bundle",
    )
    other = CommitBundle(
        account_id=ACCOUNT_A,
        conversation_id="conv_1",
        turn_id="turn_1",
        assistant_turn=build.assistant_turn("turn_1", text="Other words."),
    )
    await refused(Conflict, stores.commits.commit(other), "another assistant turn for the turn")
    reloaded = await stores.conversations.get_assistant_turn(ACCOUNT_A, "turn_1")
    equal(reloaded.to_stored_json(), turn.to_stored_json(), "the turn after the refusal")
