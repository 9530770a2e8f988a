"""Conformance checks: the commit bundle, all-or-nothing in its normative order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from turnframe_core.interactions import InteractionStatus
from turnframe_core.replay import CommittedOutcome, FailedOutcome, ReplayRecord, TurnPhase
from turnframe_core.stream import TurnStep
from turnframe_store.bundle import Stores
from turnframe_store.conformance._data import (
    _A,
    _B,
    _T0,
    _WORKFLOW,
    _assistant_turn,
    _card,
    _case,
    _entry,
    _event,
    _ids,
    _outbox_row,
    _replay,
    _start_turn,
    _status,
    _user_turn,
)
from turnframe_store.conformance._expect import _equal, _refused, _true
from turnframe_store.conformance._runner import _check
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
    await _start_turn(stores, "turn_1", account=account)
    await _start_turn(stores, "turn_2", account=account)
    journal, cards = stores.journal, stores.interactions
    await journal.begin(_entry("cmd_0", account=account, turn="turn_1"))
    await journal.complete(account, "cmd_0", CommittedOutcome(new_revision=1, event_ids=()))
    await journal.begin(_entry("cmd_1", account=account, turn="turn_2"))
    await journal.mark_executing(account, "cmd_1")
    await stores.events.append(account, [_event("evt_0", account=account)])
    await cards.insert(_card("int_stale", account=account, case=_case("case-1", 1)))
    await cards.insert(_card("int_answered", account=account, case=_case("case-2", 1)))
    await cards.begin_resolution(account, "int_answered", "opt_yes")
    await cards.insert(_card("int_idle", account=account, case=_case("case-3", 1)))
    await stores.outbox.enqueue(_outbox_row(f"obx_{tag}_0", key=f"key-{tag}-0"))
    replay_before = _replay("turn_2", account=account)
    if final_replay:
        replay_before = replay_before.advanced(TurnPhase.FAILED, at=_T0 + 1)
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
            _event("evt_1", account=account, revision=new_revision),
            _event("evt_2", account=account, revision=new_revision),
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
            CaseInvalidation(workflow=_WORKFLOW, case_id="case-1", current_revision=new_revision),
        ),
        # Each new blocking card fits only because the stages before it freed its case's slot.
        interaction_inserts=(
            _card("int_next_1", account=account, case=_case("case-1", 2), turn="turn_2"),
            _card("int_next_2", account=account, case=_case("case-2", 2), turn="turn_2"),
        ),
        outbox=(_outbox_row(f"obx_{tag}_1", key=f"key-{tag}-1"),),
        replay=_replay("turn_2", account=account).advanced(
            TurnPhase.COMMITTED, at=_T0 + 2, event_ids=("evt_1", "evt_2")
        ),
        phase=TurnPhase.COMMITTED,
    )
    return _BundleWorld(account, bundle, replay_before, phase_before)


def _progress(sequence: int) -> TurnStep:
    return TurnStep(turn_id="turn_2", sequence=sequence, at=_T0, step="execute")


@_check
async def check_a_commit_bundle_applies_its_items_in_the_normative_order(stores: Stores) -> None:
    world = await _bundle_world(stores, _A, "a")
    bundle = world.bundle
    result = await stores.commits.commit(bundle)
    _equal(_ids(result.events, "event_id"), ["evt_1", "evt_2"], "the committed events")
    sequences = [e.sequence or 0 for e in result.events]
    _true(0 < sequences[0] < sequences[1], f"sequences assigned in order: {sequences}")
    _equal(result.invalidated, ("int_stale",), "the invalidated cards")
    entry = await stores.journal.get(_A, "cmd_1")
    _equal(
        (entry.status, entry.outcome),
        (JournalStatus.COMMITTED, bundle.journal_completions[0].outcome),
        "the completed command",
    )
    _equal(await stores.events.get_by_ids(_A, ["evt_1", "evt_2"]), result.events, "the ledger")
    answered = await stores.interactions.get(_A, "int_answered")
    _equal(
        (answered.status, answered.resolution_event_ids),
        (InteractionStatus.RESOLVED, ("evt_1",)),
        "the answered card",
    )
    statuses = {
        card_id: await _status(stores, _A, card_id)
        for card_id in ("int_stale", "int_next_1", "int_next_2", "int_idle")
    }
    _equal(
        statuses,
        {
            "int_stale": InteractionStatus.INVALIDATED,
            "int_next_1": InteractionStatus.ACTIVE,
            "int_next_2": InteractionStatus.ACTIVE,
            "int_idle": InteractionStatus.ACTIVE,
        },
        "the cards",
    )
    _equal(await stores.outbox.get("obx_a_1"), bundle.outbox[0], "the outbox row")
    _equal(await stores.replay.get(_A, "turn_2"), bundle.replay, "the replay record")
    _equal(
        (await stores.conversations.get_phase(_A, "turn_2")).phase,
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
        duplicate = _event("evt_0", account=account)
        return bundle.model_copy(update={"events": (*bundle.events, duplicate)})
    if "nobody is resolving" in spoil:
        finish = InteractionFinish(
            interaction_id="int_idle", status=InteractionStatus.RESOLVED, option_id="opt_yes"
        )
        return bundle.model_copy(
            update={"interaction_finishes": (*bundle.interaction_finishes, finish)}
        )
    if "second blocking card" in spoil:
        extra_card = _card("int_extra", account=account, case=_case("case-3", 1), turn="turn_2")
        return bundle.model_copy(
            update={"interaction_inserts": (*bundle.interaction_inserts, extra_card)}
        )
    if "outbox row already enqueued" in spoil:
        duplicate_row = _outbox_row(f"obx_{tag}_9", key=f"key-{tag}-0")
        return bundle.model_copy(update={"outbox": (*bundle.outbox, duplicate_row)})
    if "gap in the turn's log" in spoil:
        return bundle.model_copy(update={"stream_events": (_progress(3), _progress(4))})
    if "another account" in spoil:
        foreign = _event("evt_9", account=_B)
        return bundle.model_copy(update={"events": (*bundle.events, foreign)})
    return bundle  # the replay and phase spoils live in the world: its record/phase is final


@_check
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
        await _refused(error, stores.commits.commit(_spoiled(world, spoil, tag)), spoil)
        after = f"after a bundle with {spoil}"
        entry = await stores.journal.get(account, "cmd_1")
        _equal(
            (entry.status, entry.outcome),
            (JournalStatus.EXECUTING, None),
            f"the executing command {after}",
        )
        settled = await stores.journal.get(account, "cmd_0")
        _equal(settled.outcome, CommittedOutcome(new_revision=1, event_ids=()), f"cmd_0 {after}")
        page = await stores.events.read_from(account, EventCursor.START, 100)
        _equal(_ids(page.events, "event_id"), ["evt_0"], f"the ledger {after}")
        statuses = {
            card_id: await _status(stores, account, card_id)
            for card_id in ("int_stale", "int_answered", "int_idle")
        }
        _equal(
            statuses,
            {
                "int_stale": InteractionStatus.ACTIVE,
                "int_answered": InteractionStatus.RESOLVING,
                "int_idle": InteractionStatus.ACTIVE,
            },
            f"the cards {after}",
        )
        for card_id in ("int_next_1", "int_next_2", "int_extra"):
            await _refused(
                NotFound, stores.interactions.get(account, card_id), f"{card_id} {after}"
            )
        await _refused(NotFound, stores.outbox.get(f"obx_{tag}_1"), f"the new row {after}")
        _equal(
            await stores.replay.get(account, "turn_2"),
            world.replay_before,
            f"the replay record {after}",
        )
        _equal(
            (await stores.conversations.get_phase(account, "turn_2")).phase,
            world.phase_before,
            f"the phase {after}",
        )
        _equal(
            await stores.conversations.stream_events(account, "turn_2", 0, 100),
            (_progress(1),),
            f"the stream log {after}",
        )


@_check
async def check_each_bundle_item_is_judged_on_the_state_its_own_stage_left(stores: Stores) -> None:
    """A repeated finish is accepted on the card as it stood at the finish stage, even when a
    later stage of the same bundle (an invalidation) moves that card."""
    await _start_turn(stores, "turn_1")
    await stores.interactions.insert(_card("int_1", case=_case("case-1", 1)))
    bundle = CommitBundle(
        account_id=_A,
        conversation_id="conv_1",
        turn_id="turn_1",
        interaction_finishes=(
            InteractionFinish(interaction_id="int_1", status=InteractionStatus.ACTIVE),
        ),
        invalidations=(CaseInvalidation(workflow=_WORKFLOW, case_id="case-1", current_revision=4),),
    )
    result = await stores.commits.commit(bundle)
    _equal(result.invalidated, ("int_1",), "the cards the later invalidation stage moved")
    _equal(await _status(stores, _A, "int_1"), InteractionStatus.INVALIDATED, "the card")


@_check
async def check_a_commit_bundle_accepts_a_turn_and_journals_its_commands_once(
    stores: Stores,
) -> None:
    await stores.conversations.ensure_conversation(_A, "conv_1")
    await _start_turn(stores, "turn_0")
    await stores.journal.begin(_entry("cmd_waiting", turn="turn_0", status=_AWAITING))
    bundle = CommitBundle(
        account_id=_A,
        conversation_id="conv_2",
        turn_id="turn_1",
        user_turn=_user_turn("turn_1", conversation="conv_2"),
        journal_admissions=(_entry("cmd_1"), _entry("cmd_2")),
        journal_starts=("cmd_1", "cmd_2", "cmd_waiting"),
        replay=_replay("turn_1", conversation="conv_2", phase=TurnPhase.EXECUTING),
        phase=TurnPhase.EXECUTING,
    )
    result = await stores.commits.commit(bundle)
    _equal([type(a).__name__ for a in result.admissions], ["Fresh", "Fresh"], "the admissions")
    _equal(
        (await stores.conversations.get_conversation(_A, "conv_2")).conversation_id,
        "conv_2",
        "the conversation the bundle created",
    )
    _equal(
        (await stores.conversations.get_user_turn(_A, "turn_1")).input.text,
        "hello",
        "the accepted user turn",
    )
    _equal(
        (await stores.conversations.get_phase(_A, "turn_1")).phase,
        TurnPhase.EXECUTING,
        "the marker after the bundle",
    )
    for command in ("cmd_1", "cmd_2", "cmd_waiting"):
        _equal(
            (await stores.journal.get(_A, command)).status,
            JournalStatus.EXECUTING,
            f"{command} after the bundle",
        )
    again = bundle.model_copy(
        update={
            "turn_id": "turn_9",
            "user_turn": _user_turn("turn_1", conversation="conv_2").model_copy(
                update={"turn_id": "turn_1"}
            ),
            "journal_admissions": (),
            "journal_starts": (),
            "replay": None,
            "phase": None,
        }
    )
    await _refused(InvalidRecord, stores.commits.commit(again), "a user turn of another turn")
    repeat = CommitBundle(
        account_id=_A,
        conversation_id="conv_2",
        turn_id="turn_1",
        user_turn=_user_turn("turn_1", conversation="conv_2"),
        journal_admissions=(_entry("cmd_3"),),
    )
    await _refused(Conflict, stores.commits.commit(repeat), "the same user turn again")
    await _refused(NotFound, stores.journal.get(_A, "cmd_3"), "a command of the refused bundle")


@_check
async def check_a_commit_bundle_stores_the_assistant_turn_once(stores: Stores) -> None:
    await _start_turn(stores, "turn_1")
    turn = _assistant_turn("turn_1")
    bundle = CommitBundle(
        account_id=_A,
        conversation_id="conv_1",
        turn_id="turn_1",
        assistant_turn=turn,
        replay=_replay("turn_1", phase=TurnPhase.DELIVERED),
        phase=TurnPhase.DELIVERED,
    )
    await stores.commits.commit(bundle)
    loaded = await stores.conversations.get_assistant_turn(_A, "turn_1")
    _equal(loaded.to_stored_json(), turn.to_stored_json(), "the stored turn's bytes")
    _equal(
        (await stores.conversations.get_phase(_A, "turn_1")).phase,
        TurnPhase.DELIVERED,
        "the marker after the bundle",
    )
    other = CommitBundle(
        account_id=_A,
        conversation_id="conv_1",
        turn_id="turn_1",
        assistant_turn=_assistant_turn("turn_1", text="Other words."),
    )
    await _refused(Conflict, stores.commits.commit(other), "another assistant turn for the turn")
    reloaded = await stores.conversations.get_assistant_turn(_A, "turn_1")
    _equal(reloaded.to_stored_json(), turn.to_stored_json(), "the turn after the refusal")
