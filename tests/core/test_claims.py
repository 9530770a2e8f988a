"""The claim guard: one violation code per rule, and a clean turn passes."""

import pytest

from turnframe_core import codes
from turnframe_core.blocks import AnswerBlock, InteractionBlock, ReceiptBlock, TransitionBlock
from turnframe_core.claims import ClaimGuardViolation, check_claims, ensure_claims
from turnframe_core.facts import InteractionAvailable, OperationalOutcome
from turnframe_core.interactions import InteractionKind
from turnframe_test.builders import confirm_card, receipt_block


def _outcome(receipt, event_ids=None):
    return OperationalOutcome(
        receipt_id=receipt.receipt_id,
        event_ids=event_ids or receipt.event_ids,
        status_code=receipt.status_code,
    )


def _card_fact(interaction_id="int_1"):
    return InteractionAvailable(
        interaction_id=interaction_id, interaction_kind=InteractionKind.CONFIRM_COMMAND
    )


def _card_block():
    return InteractionBlock.from_view("blk_card", confirm_card().view())


def test_a_turn_whose_claims_are_all_backed_passes():
    receipt = receipt_block(("evt_1", "evt_2"))
    prose = TransitionBlock(
        block_id="blk_t",
        text="Done, and confirm below.",
        facts_used=(_outcome(receipt, ("evt_1",)), _card_fact()),
    )
    assert check_claims([receipt, prose, _card_block()]) == []
    ensure_claims([receipt, prose, _card_block()])


def test_a_receipt_without_events_is_a_violation():
    # Validation makes this impossible to build; the guard still checks data that bypassed it.
    good = receipt_block()
    forged = ReceiptBlock.model_construct(**{**dict(good), "event_ids": ()})
    assert [v.code for v in check_claims([forged])] == [codes.CLAIM_RECEIPT_WITHOUT_EVENTS]


def test_two_receipts_with_one_id_are_a_violation():
    receipt = receipt_block()
    twin = receipt.model_copy(update={"block_id": "blk_other"})
    assert [v.code for v in check_claims([receipt, twin])] == [codes.CLAIM_DUPLICATE_RECEIPT_ID]


def test_an_outcome_fact_without_a_receipt_in_the_turn_is_a_violation():
    absent = receipt_block(("evt_9",), status_code="test.sent")
    prose = AnswerBlock(block_id="blk_a", text="It was sent.", facts_used=(_outcome(absent),))
    assert [v.code for v in check_claims([receipt_block(), prose])] == [
        codes.CLAIM_UNBACKED_OUTCOME
    ]


def test_an_outcome_fact_citing_events_its_receipt_does_not_cover_is_a_violation():
    receipt = receipt_block(("evt_1",))
    prose = TransitionBlock(
        block_id="blk_t", text="Both done.", facts_used=(_outcome(receipt, ("evt_1", "evt_2")),)
    )
    assert [v.code for v in check_claims([receipt, prose])] == [codes.CLAIM_UNBACKED_OUTCOME]


def test_a_card_fact_without_the_card_in_the_turn_is_a_violation():
    prose = TransitionBlock(
        block_id="blk_t", text="Confirm below.", facts_used=(_card_fact("int_gone"),)
    )
    violations = check_claims([_card_block(), prose])
    assert [v.code for v in violations] == [codes.CLAIM_INTERACTION_NOT_IN_TURN]
    assert violations[0].ref == "int_gone"


def test_ensure_claims_raises_with_every_violation():
    prose = TransitionBlock(
        block_id="blk_t",
        text="x",
        facts_used=(_card_fact("int_gone"), _outcome(receipt_block(("evt_5",)))),
    )
    with pytest.raises(ClaimGuardViolation) as info:
        ensure_claims([prose])
    assert {v.code for v in info.value.violations} == {
        codes.CLAIM_INTERACTION_NOT_IN_TURN,
        codes.CLAIM_UNBACKED_OUTCOME,
    }
    assert info.value.code == codes.CLAIM_VIOLATION
