import pytest
from pydantic import ValidationError

from turnframe_core import AssistantTurn, TurnInput, TurnStatus
from turnframe_core.blocks import InteractionBlock, NoticeBlock, TransitionBlock
from turnframe_core.derive import derive_block_id
from turnframe_core.interactions import InteractionResponse
from turnframe_core.turn import InvalidTurnInput, TerminalStatus
from turnframe_test.builders import confirm_card, copy_ref, receipt_block


def _notice(slot="n"):
    return NoticeBlock(
        block_id=derive_block_id("acct_1", "turn_1", slot),
        code="turnframe.notice.command_failed",
        text="That did not go through.",
        copy_ref=copy_ref(),
    )


def _transition(text="Here is where things stand."):
    return TransitionBlock(block_id=derive_block_id("acct_1", "turn_1", "transition"), text=text)


def _card():
    return InteractionBlock.from_view(
        derive_block_id("acct_1", "turn_1", "card"), confirm_card().view()
    )


def _turn(blocks, status=TurnStatus.COMPLETED):
    started = AssistantTurn.begin(
        turn_id="turn_1", conversation_id="conv_1", account_id="acct_1", locale="en", created_at=10
    )
    data = started.model_dump()
    data.update(
        blocks=blocks, status=status, completed_at=None if status is TurnStatus.STREAMING else 20
    )
    return AssistantTurn.model_validate(data)


def test_blocks_in_the_documented_order_are_accepted():
    turn = _turn([receipt_block(), _notice(), _transition(), _card()])
    assert [b.kind for b in turn.blocks] == ["receipt", "notice", "transition", "interaction"]


def test_a_card_before_the_text_that_introduces_it_is_refused():
    with pytest.raises(ValidationError, match="out of the documented block order"):
        _turn([_card(), _transition()])


def test_a_notice_after_the_transition_is_refused():
    with pytest.raises(ValidationError):
        _turn([_transition(), _notice()])


def test_block_ids_are_unique_within_a_turn():
    with pytest.raises(ValidationError, match="repeats a block_id"):
        _turn([_notice("same"), _notice("same")])


def test_a_turn_has_at_most_one_transition():
    second = TransitionBlock(block_id=derive_block_id("acct_1", "turn_1", "t2"), text="Again.")
    with pytest.raises(ValidationError):
        _turn([_transition(), second])


def test_the_replay_token_is_derived_from_the_turn_id():
    data = _turn([]).model_dump()
    data["replay_token"] = "rpl_forged"
    with pytest.raises(ValidationError):
        AssistantTurn.model_validate(data)


def test_blocks_are_immutable():
    turn = _turn([_notice()])
    with pytest.raises(ValidationError):
        turn.blocks = ()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        turn.blocks.append(_notice("x"))  # type: ignore[attr-defined]


def test_a_terminal_turn_never_changes_status():
    streaming = _turn([], status=TurnStatus.STREAMING)
    done = streaming.finish(TurnStatus.COMPLETED, at=30, blocks=(_notice(),))
    assert done.status is TurnStatus.COMPLETED and done.completed_at == 30
    with pytest.raises(TerminalStatus):
        done.finish(TurnStatus.FAILED, at=40)


def test_a_stored_turn_reloads_byte_identical():
    turn = _turn([receipt_block(), _notice(), _transition(), _card()])
    stored = turn.to_stored_json()
    reloaded = AssistantTurn.from_stored_json(stored)
    assert reloaded == turn
    assert reloaded.to_stored_json() == stored


def test_a_stored_turn_with_an_unknown_block_kind_round_trips_unchanged():
    stored = _turn([_notice()]).model_dump(mode="json")
    stored["blocks"].insert(0, {"kind": "poll", "block_id": "blk_future", "choices": ["a", "b"]})
    import json

    from turnframe_core.canonical import canonical_json

    text = canonical_json(stored)
    turn = AssistantTurn.from_stored_json(text)
    assert turn.has_unknown_blocks
    assert turn.to_stored_json() == text
    with pytest.raises(ValidationError):
        AssistantTurn.model_validate(json.loads(text))


def test_a_turn_input_needs_text_a_card_answer_or_an_attachment():
    with pytest.raises(InvalidTurnInput):
        TurnInput(account_id="acct_1", conversation_id="conv_1", text="   ")
    with pytest.raises(InvalidTurnInput):
        TurnInput.model_validate({"account_id": "acct_1", "conversation_id": "conv_1"})


def test_a_click_only_turn_is_recognised():
    click = InteractionResponse(
        interaction_id="int_1", option_id="opt_confirm", expected_case_revision=1
    )
    assert TurnInput(
        account_id="acct_1", conversation_id="conv_1", interaction_response=click
    ).is_click_only
    assert not TurnInput(
        account_id="acct_1",
        conversation_id="conv_1",
        interaction_response=click,
        text="and also this",
    ).is_click_only


def test_a_client_answer_cannot_smuggle_extra_fields():
    with pytest.raises(InvalidTurnInput):
        InteractionResponse.model_validate(
            {
                "interaction_id": "int_1",
                "option_id": "opt_confirm",
                "expected_case_revision": 1,
                "action": {"kind": "confirm_commands", "command_ids": ["cmd_evil"]},
            }
        )


def test_a_turn_is_checked_once_and_a_copy_or_an_unvalidated_turn_again():
    """A validated turn placed in another model is not checked again; a turn whose structure
    was changed by `model_copy`, or built by `model_construct`, is still refused there."""
    from turnframe_core.stream import TurnCompleted

    turn = _turn([receipt_block(), _notice(), _transition()])
    assert turn.checked()
    assert AssistantTurn.model_validate(turn) is turn
    TurnCompleted(turn_id="turn_1", sequence=2, at=30, turn=turn)
    assert turn.model_dump() == _turn([receipt_block(), _notice(), _transition()]).model_dump()
    assert (
        turn.to_stored_json()
        == AssistantTurn.from_stored_json(turn.to_stored_json()).to_stored_json()
    )
    broken = turn.model_copy(update={"blocks": (_notice("same"), _notice("same"))})
    assert not broken.checked()
    with pytest.raises(ValidationError, match="repeats a block_id"):
        AssistantTurn.model_validate(broken)
    with pytest.raises(ValidationError, match="repeats a block_id"):
        TurnCompleted(turn_id="turn_1", sequence=2, at=30, turn=broken)
    unchecked = AssistantTurn.model_construct(
        **{**dict(turn), "blocks": (_transition(), _card(), _notice())}
    )
    with pytest.raises(ValidationError, match="out of the documented block order"):
        TurnCompleted(turn_id="turn_1", sequence=2, at=30, turn=unchecked)
