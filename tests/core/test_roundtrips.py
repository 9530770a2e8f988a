"""model -> JSON -> model is the identity, for every stored or transmitted core record."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from turnframe_core import (
    AssistantTurn,
    CommandEnvelope,
    DomainEvent,
    InteractionBlock,
    NoticeBlock,
    ReplayRecord,
    TurnInput,
    TurnPhase,
    TurnStatus,
    digest,
)
from turnframe_core.blocks import AnswerBlock, AnswerStatus, ReceiptBlock, TransitionBlock
from turnframe_core.commands import ConfirmedInteraction, DirectSafeUserAct, InternalPolicy
from turnframe_core.derive import derive_block_id, derive_replay_token
from turnframe_core.facts import InteractionAvailable, OperationalOutcome, StateValue
from turnframe_core.interactions import ActionClass, InteractionKind, ResolutionChannel
from turnframe_core.replay import CommandOutcomeRecord, CommittedOutcome, OutcomeUnknown
from turnframe_test.builders import case, confirm_card, copy_ref, receipt_block

words = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20
)
ident = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=10)
json_leaf = st.none() | st.booleans() | st.integers(-(2**60), 2**60) | words
payloads = st.dictionaries(ident, json_leaf | st.lists(json_leaf, max_size=3), max_size=4)
case_refs = st.builds(
    lambda w, c, r: case(workflow=w, case_id=c, revision=r),
    ident.map(lambda s: "w" + s),
    ident,
    st.integers(0, 10**6),
)
event_id_sets = st.lists(ident.map(lambda s: "evt_" + s), min_size=1, max_size=4, unique=True).map(
    tuple
)
origins = st.one_of(
    payloads.map(lambda p: DirectSafeUserAct(evidence_digest=digest(p))),
    ident.map(lambda k: InternalPolicy(policy_key=k)),
    st.builds(
        lambda i, k: ConfirmedInteraction(
            interaction_id="int_" + i,
            payload_hash=digest(i),
            interaction_kind=k,
            action_class=ActionClass.CONFIRMS_COMMANDS,
            channel=ResolutionChannel.CLICK,
        ),
        ident,
        st.sampled_from(list(InteractionKind)),
    ),
)


@st.composite
def turns(draw):
    receipts = draw(
        st.lists(
            st.tuples(event_id_sets, ident), max_size=3, unique_by=lambda t: (frozenset(t[0]), t[1])
        )
    )
    blocks = [receipt_block(ids, status_code=f"test.{code}") for ids, code in receipts]
    for i in range(draw(st.integers(0, 2))):
        blocks.append(
            NoticeBlock(
                block_id=derive_block_id("acct_1", "turn_1", f"n{i}"),
                code=f"turnframe.notice.n{i}",
                text=draw(words),
                copy_ref=copy_ref(),
            )
        )
    facts = [
        OperationalOutcome(
            receipt_id=b.receipt_id, event_ids=b.event_ids, status_code=b.status_code
        )
        for b in blocks
        if isinstance(b, ReceiptBlock)
    ]
    for i in range(draw(st.integers(0, 2))):
        blocks.append(
            AnswerBlock(
                block_id=derive_block_id("acct_1", "turn_1", f"a{i}"),
                question_id=f"q{i}",
                text=draw(words),
                status=draw(st.sampled_from(list(AnswerStatus))),
                facts_used=(
                    StateValue(case_ref=draw(case_refs), field="f", value=draw(json_leaf)),
                ),
            )
        )
    card = confirm_card()
    blocks.append(
        TransitionBlock(
            block_id=derive_block_id("acct_1", "turn_1", "t"),
            text=draw(words),
            facts_used=(
                *facts,
                InteractionAvailable(
                    interaction_id=card.interaction_id, interaction_kind=card.kind
                ),
            ),
        )
    )
    blocks.append(InteractionBlock.from_view(derive_block_id("acct_1", "turn_1", "c"), card.view()))
    return AssistantTurn(
        turn_id="turn_1",
        conversation_id="conv_1",
        account_id="acct_1",
        status=TurnStatus.COMPLETED,
        locale=draw(st.sampled_from(["en", "it"])),
        blocks=tuple(blocks),
        replay_token=derive_replay_token("turn_1"),
        created_at=draw(st.integers(0, 10**12)),
        completed_at=10**12 + 1,
        subjects=tuple(draw(st.lists(case_refs, max_size=2))),
    )


@settings(max_examples=60)
@given(turns())
def test_an_assistant_turn_round_trips_through_json(turn):
    assert AssistantTurn.model_validate_json(turn.model_dump_json()) == turn
    assert (
        AssistantTurn.from_stored_json(turn.to_stored_json()).to_stored_json()
        == turn.to_stored_json()
    )


@given(case_refs, origins, ident, payloads)
def test_a_command_envelope_round_trips_through_json(case_ref, origin, command_type, payload):
    env = CommandEnvelope.build(
        command_id="cmd_1",
        turn_id="turn_1",
        account_id="acct_1",
        case_ref=case_ref,
        origin=origin,
        command_type="x." + command_type,
        payload=payload,
    )
    assert CommandEnvelope.model_validate_json(env.model_dump_json()) == env


@given(case_refs, event_id_sets, payloads, st.integers(0, 10**12))
def test_a_domain_event_round_trips_through_json(case_ref, ids, payload, at):
    event = DomainEvent(
        event_id=ids[0],
        account_id="acct_1",
        workflow=case_ref.workflow,
        case_id=case_ref.case_id,
        case_revision=case_ref.expected_revision,
        command_id="cmd_1",
        event_type="x.happened",
        payload=payload,
        occurred_at=at,
        sequence=7,
    )
    assert DomainEvent.model_validate_json(event.model_dump_json()) == event


@given(case_refs, st.integers(0, 10**6))
def test_an_interaction_round_trips_through_json(case_ref, created_at):
    card = confirm_card(case_ref=case_ref, created_at=created_at)
    assert type(card).model_validate_json(card.model_dump_json()) == card


@given(words, case_refs, origins, event_id_sets, st.sampled_from(list(TurnPhase)))
def test_a_replay_record_round_trips_through_json(text, case_ref, origin, ids, phase):
    env = CommandEnvelope.build(
        command_id="cmd_1",
        turn_id="turn_1",
        account_id="acct_1",
        case_ref=case_ref,
        origin=origin,
        command_type="x.y",
    )
    record = ReplayRecord(
        turn_id="turn_1",
        conversation_id="conv_1",
        account_id="acct_1",
        replay_token=derive_replay_token("turn_1"),
        phase=phase,
        recorded_at=5,
        input=TurnInput(
            account_id="acct_1", conversation_id="conv_1", text=text if text.strip() else "x"
        ),
        loaded_cases=(case_ref,),
        event_ids=ids,
        command_outcomes=(
            CommandOutcomeRecord(
                command_id="cmd_1",
                command_type="x.y",
                idempotency_key=env.idempotency_key,
                case_ref=case_ref,
                origin=origin,
                outcome=CommittedOutcome(
                    new_revision=case_ref.expected_revision + 1, event_ids=ids
                ),
            ),
            CommandOutcomeRecord(
                command_id="cmd_2",
                command_type="x.y",
                idempotency_key=env.idempotency_key,
                case_ref=case_ref,
                origin=origin,
                outcome=OutcomeUnknown(attempt_id="att_1"),
            ),
        ),
    )
    again = ReplayRecord.model_validate_json(record.model_dump_json())
    assert again == record
    assert again.digest() == record.digest()
