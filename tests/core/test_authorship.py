"""Prose says who wrote it: a model's draft is `model`, server copy standing in for one is
`server` with the copy it was rendered from. Nothing a model sends can set it, and the claim guard
names the author of each violation."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from turnframe_core import AssistantTurn, TurnStatus, codes
from turnframe_core.blocks import (
    STORED_CONTEXT,
    AnswerBlock,
    MalformedModelOutput,
    TransitionBlock,
    parse_model_output,
)
from turnframe_core.claims import check_claims
from turnframe_core.derive import derive_block_id, derive_replay_token
from turnframe_core.facts import OperationalOutcome
from turnframe_test.builders import copy_ref, receipt_block


def _unbacked() -> OperationalOutcome:
    absent = receipt_block(("evt_9",), status_code="test.sent")
    return OperationalOutcome(
        receipt_id=absent.receipt_id, event_ids=absent.event_ids, status_code=absent.status_code
    )


def test_server_copy_is_server_written() -> None:
    block = TransitionBlock(author="server", block_id="blk_t", text="Done.", copy_ref=copy_ref())
    assert block.author == "server"
    assert json.loads(block.model_dump_json())["author"] == "server"


@pytest.mark.parametrize("cls", [AnswerBlock, TransitionBlock])
def test_server_written_prose_must_name_its_copy(cls) -> None:
    with pytest.raises(ValidationError, match="copy_ref"):
        cls(author="server", block_id="blk_x", text="Done.")


def _turn(*blocks) -> AssistantTurn:
    return AssistantTurn(
        turn_id="turn_1",
        conversation_id="conv_1",
        account_id="acct_1",
        status=TurnStatus.COMPLETED,
        locale="en",
        blocks=blocks,
        replay_token=derive_replay_token("turn_1"),
        created_at=1,
        completed_at=2,
    )


@pytest.mark.parametrize("cls", [AnswerBlock, TransitionBlock])
def test_a_turn_cannot_say_a_model_wrote_prose_rendered_from_copy(cls) -> None:
    mislabelled = cls(block_id="blk_x", text="Done.", copy_ref=copy_ref())
    with pytest.raises(ValidationError, match="rendered from server copy"):
        _turn(mislabelled)
    honest = mislabelled.model_copy(update={"author": "server"})
    assert _turn(honest).blocks == (honest,)


@pytest.mark.parametrize(
    "extra", [{"author": "server"}, {"author": "model"}, {"copy_ref": copy_ref().model_dump()}]
)
def test_a_model_draft_cannot_claim_authorship_or_server_copy(extra) -> None:
    draft = {"kind": "transition", "text": "Done.", **extra}
    with pytest.raises(MalformedModelOutput):
        parse_model_output(draft, turn_id="turn_1", account_id="acct_1")


def test_a_parsed_draft_is_model_written() -> None:
    [block] = parse_model_output(
        {"kind": "transition", "text": "Done."}, turn_id="turn_1", account_id="acct_1"
    )
    assert (block.author, block.copy_ref) == ("model", None)


def _legacy_turn_json() -> str:
    """A turn stored before authorship was recorded: server copy under `author: model`."""
    transition = {
        "kind": "transition",
        "author": "model",
        "block_id": derive_block_id("acct_1", "turn_1", "transition"),
        "text": "Is there anything else?",
        "facts_used": [],
        "copy_ref": copy_ref().model_dump(mode="json"),
    }
    modern = _turn()
    data = json.loads(modern.to_stored_json())
    data["blocks"] = [transition]
    del data["schema_version"]  # stored before turns carried one: 1.0
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_a_turn_stored_before_authorship_was_recorded_still_reads_byte_for_byte() -> None:
    stored = _legacy_turn_json()
    turn = AssistantTurn.from_stored_json(stored)
    [block] = turn.blocks
    assert isinstance(block, TransitionBlock) and block.author == "model"
    assert json.loads(turn.to_stored_json()) == json.loads(stored)
    assert turn.schema_version == "1.0"
    # Its prose keeps the label it was written with, wherever the 1.0 turn is read again.
    assert AssistantTurn.model_validate(turn.model_dump()) == turn
    assert AssistantTurn.model_validate(turn.model_dump(), context=STORED_CONTEXT) == turn
    assert AssistantTurn.model_validate_json(turn.model_dump_json()) == turn


def test_the_claim_guard_names_the_author_of_each_violation() -> None:
    model = AnswerBlock(block_id="blk_a", text="It was sent.", facts_used=(_unbacked(),))
    server = TransitionBlock(
        author="server",
        block_id="blk_t",
        text="Done.",
        facts_used=(_unbacked(),),
        copy_ref=copy_ref(),
    )
    found = [(v.code, v.author) for v in check_claims([model, server])]
    assert found == [
        (codes.CLAIM_UNBACKED_OUTCOME, "model"),
        (codes.CLAIM_UNBACKED_OUTCOME, "server"),
    ]
