"""Structured narration in the core: a narrator's draft is read into moves or refused with a
typed code (never a crash, never its words in the error); prose made of moves is model-written,
names its copy and needs schema 1.2; stored turns from before keep their text and digest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from turnframe_core import (
    AssistantTurn,
    Move,
    MoveKind,
    MovesRefused,
    Referable,
    ReferableKind,
    ReferableOption,
    TurnStatus,
    codes,
)
from turnframe_core.blocks import AnswerBlock, TransitionBlock
from turnframe_core.canonical import digest
from turnframe_core.derive import derive_replay_token
from turnframe_core.moves import check_moves, parse_moves
from turnframe_core.replay import ProseFinding
from turnframe_core.turn import TURN_SCHEMA_VERSION
from turnframe_test.builders import copy_ref

GOLDEN_TURNS = Path(__file__).resolve().parents[1] / "data" / "assistant_turns_1_0.jsonl"

ALL_MOVES = tuple(MoveKind)
THREE_EACH = {m.value: 3 for m in MoveKind}
REFS = (
    Referable(ref="blk_receipt", kind=ReferableKind.RECEIPT, says="Name set."),
    Referable(
        ref="blk_card",
        kind=ReferableKind.CARD,
        says="Rebook the outbound flight?",
        options=(ReferableOption(option="confirm", says="Rebook"),),
    ),
    Referable(ref="fact.2", kind=ReferableKind.FACT, says="name Ada Lovelace"),
    Referable(ref="obligation.1", kind=ReferableKind.OBLIGATION, says="What is your email?"),
    Referable(ref="operation.1", kind=ReferableKind.OPERATION, says="Rebook a flight"),
)


def _transition(*moves: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "transition", "moves": list(moves)}


def _refused(raw: Any, **where: Any) -> MovesRefused:
    with pytest.raises(MovesRefused) as caught:
        parse_moves(raw, kind=where.pop("kind", "transition"), **where)
    return caught.value


# --- reading a draft ----------------------------------------------------------------------------


def test_a_structured_draft_reads_as_its_moves() -> None:
    moves = parse_moves(
        _transition(
            {"move": "acknowledge"},
            {"move": "introduce", "ref": "blk_receipt", "variant": 1},
            {"move": "explain", "ref": "blk_card", "option": "confirm"},
        ),
        kind="transition",
    )
    assert moves == (
        Move(move=MoveKind.ACKNOWLEDGE),
        Move(move=MoveKind.INTRODUCE, ref="blk_receipt", variant=1),
        Move(move=MoveKind.EXPLAIN, ref="blk_card", option="confirm"),
    )


def test_an_answer_draft_reads_only_for_its_own_question() -> None:
    draft = {"kind": "answer", "question_id": "q1", "moves": [{"move": "cannot_answer"}]}
    assert parse_moves(draft, kind="answer", question_id="q1") == (
        Move(move=MoveKind.CANNOT_ANSWER),
    )
    assert _refused(draft, kind="answer", question_id="q2").code == codes.NARRATION_BAD_SHAPE


def test_a_draft_as_json_text_reads_like_the_object() -> None:
    text = json.dumps(_transition({"move": "close", "variant": 2}))
    assert parse_moves(text, kind="transition") == (Move(move=MoveKind.CLOSE, variant=2),)


@pytest.mark.parametrize(
    "raw",
    [
        "Your flight is rebooked.",
        json.dumps("Your flight is rebooked."),
        {"kind": "transition", "text": "Your flight is rebooked."},
        {"kind": "transition", "text": "Done.", "moves": [{"move": "close"}]},
    ],
)
def test_free_text_in_structured_mode_is_refused_as_free_text(raw: Any) -> None:
    refused = _refused(raw)
    assert refused.code == codes.NARRATION_FREE_TEXT
    assert "rebooked" not in str(refused) and "Done" not in str(refused)


@pytest.mark.parametrize("name", ["book_flight", "Greet", "", "confirm", 3, None])
def test_an_unknown_move_is_refused_as_unknown(name: Any) -> None:
    refused = _refused(_transition({"move": "greet"}, {"move": name}))
    assert (refused.code, refused.index) == (codes.NARRATION_UNKNOWN_MOVE, 1)


@pytest.mark.parametrize(
    "raw",
    [
        [_transition({"move": "close"})],
        42,
        {"kind": "answer", "moves": [{"move": "close"}]},
        {"kind": "transition"},
        {"kind": "transition", "moves": []},
        {"kind": "transition", "moves": {"move": "close"}},
        {"kind": "transition", "moves": ["close"]},
        {"kind": "transition", "moves": [{"move": "close"}], "facts_used": []},
        {"kind": "transition", "moves": [{"move": "close"}] * 13},
        _transition({"move": "state"}),
        _transition({"move": "greet", "ref": "blk_receipt"}),
        _transition({"move": "introduce", "ref": "blk_card", "option": "confirm"}),
        _transition({"move": "explain", "ref": "blk_card"}),
        _transition({"move": "close", "variant": -1}),
        _transition({"move": "close", "variant": 1.5}),
        _transition({"move": "close", "variant": "1"}),
        _transition({"move": "close", "variant": True}),
        _transition({"move": "close", "tone": "warm"}),
        "{" * 5_000,
    ],
)
def test_a_draft_of_another_shape_is_refused_as_bad_shape(raw: Any) -> None:
    assert _refused(raw).code in (codes.NARRATION_BAD_SHAPE, codes.NARRATION_FREE_TEXT)
    if not isinstance(raw, str):
        assert _refused(raw).code == codes.NARRATION_BAD_SHAPE


_KEYS = st.sampled_from(["kind", "moves", "move", "ref", "variant", "text", "option"])


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(_KEYS | st.text(max_size=5), inner, max_size=4)
        ),
        max_leaves=20,
    )
)
def test_whatever_a_narrator_sends_reads_as_moves_or_a_typed_refusal(raw: Any) -> None:
    try:
        moves = parse_moves(raw if not isinstance(raw, bytes) else "", kind="transition")
    except MovesRefused as refused:
        assert refused.code.startswith("turnframe.narration.")
        assert refused.code in codes.ALL_CODES
    else:
        assert moves and all(isinstance(m, Move) for m in moves)


# --- judging moves against the turn ---------------------------------------------------------------


def _check(*moves: Move, allowed: tuple[MoveKind, ...] = ALL_MOVES) -> MovesRefused | None:
    return check_moves(moves, refs=REFS, allowed=allowed, variants=THREE_EACH)


def test_moves_about_this_turn_within_their_phrasings_pass() -> None:
    assert (
        _check(
            Move(move=MoveKind.INTRODUCE, ref="blk_receipt", variant=2),
            Move(move=MoveKind.STATE, ref="fact.2"),
            Move(move=MoveKind.EXPLAIN, ref="blk_card", option="confirm", variant=1),
            Move(move=MoveKind.ASK, ref="obligation.1"),
            Move(move=MoveKind.ASK, ref="operation.1"),
            Move(move=MoveKind.OFFER, ref="operation.1"),
        )
        is None
    )


@pytest.mark.parametrize(
    "move",
    [
        Move(move=MoveKind.INTRODUCE, ref="blk_other_turn"),
        Move(move=MoveKind.STATE, ref="fact.9"),
        Move(move=MoveKind.STATE, ref="blk_receipt"),  # a receipt is introduced, not stated
        Move(move=MoveKind.OFFER, ref="obligation.1"),
        Move(move=MoveKind.EXPLAIN, ref="blk_receipt", option="confirm"),
        Move(move=MoveKind.EXPLAIN, ref="blk_card", option="cancel_everything"),
    ],
)
def test_a_move_naming_something_not_in_this_turn_is_refused(move: Move) -> None:
    refused = _check(Move(move=MoveKind.GREET), move)
    assert refused is not None
    assert (refused.code, refused.index) == (codes.NARRATION_REF_NOT_IN_TURN, 1)


@pytest.mark.parametrize("variant", [3, 4, 10**9])
def test_a_variant_out_of_range_is_refused(variant: int) -> None:
    refused = _check(Move(move=MoveKind.CLOSE, variant=variant))
    assert refused is not None and refused.code == codes.NARRATION_VARIANT_OUT_OF_RANGE


def test_a_move_with_no_phrasing_at_all_is_out_of_range() -> None:
    refused = check_moves(
        [Move(move=MoveKind.GREET)], refs=REFS, allowed=ALL_MOVES, variants={"close": 3}
    )
    assert refused is not None and refused.code == codes.NARRATION_VARIANT_OUT_OF_RANGE


def test_a_move_this_turn_does_not_offer_is_refused() -> None:
    refused = _check(Move(move=MoveKind.CANNOT_ANSWER), allowed=(MoveKind.CLOSE,))
    assert refused is not None and refused.code == codes.NARRATION_MOVE_NOT_OFFERED


def test_every_narration_code_is_a_stable_code() -> None:
    narration = {c for c in codes.ALL_CODES if c.startswith("turnframe.narration.")}
    assert narration == {
        codes.NARRATION_FREE_TEXT,
        codes.NARRATION_UNKNOWN_MOVE,
        codes.NARRATION_MOVE_NOT_OFFERED,
        codes.NARRATION_REF_NOT_IN_TURN,
        codes.NARRATION_VARIANT_OUT_OF_RANGE,
        codes.NARRATION_COPY_MISSING,
        codes.NARRATION_BAD_SHAPE,
    }


# --- prose made of moves --------------------------------------------------------------------------


def _turn(*blocks: Any, version: str = TURN_SCHEMA_VERSION) -> AssistantTurn:
    return AssistantTurn(
        schema_version=version,
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


CLOSE = (Move(move=MoveKind.CLOSE),)


@pytest.mark.parametrize("cls", [AnswerBlock, TransitionBlock])
def test_model_prose_made_of_moves_names_its_copy_and_may_stand_in_a_turn(cls: Any) -> None:
    block = cls(block_id="blk_x", text="Anything else?", copy_ref=copy_ref(), moves=CLOSE)
    assert _turn(block).blocks == (block,)
    assert json.loads(block.model_dump_json())["moves"] == [
        {"move": "close", "ref": None, "option": None, "variant": 0}
    ]


@pytest.mark.parametrize("cls", [AnswerBlock, TransitionBlock])
def test_model_prose_with_copy_but_no_moves_is_still_mislabelled(cls: Any) -> None:
    with pytest.raises(ValidationError, match="no model chose its moves"):
        _turn(cls(block_id="blk_x", text="Anything else?", copy_ref=copy_ref()))


@pytest.mark.parametrize("cls", [AnswerBlock, TransitionBlock])
def test_moves_without_copy_or_under_the_server_are_refused(cls: Any) -> None:
    with pytest.raises(ValidationError, match="copy_ref"):
        cls(block_id="blk_x", text="Anything else?", moves=CLOSE)
    with pytest.raises(ValidationError, match="only model prose"):
        cls(author="server", block_id="blk_x", text="x", copy_ref=copy_ref(), moves=CLOSE)


@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_a_turn_of_an_earlier_schema_cannot_hold_moves(version: str) -> None:
    block = TransitionBlock(block_id="blk_x", text="Anything?", copy_ref=copy_ref(), moves=CLOSE)
    with pytest.raises(ValidationError, match="carries moves"):
        _turn(block, version=version)


@pytest.mark.parametrize("cls", [AnswerBlock, TransitionBlock])
def test_prose_without_moves_serializes_as_it_did_before_moves_existed(cls: Any) -> None:
    block = cls(author="server", block_id="blk_x", text="Done.", copy_ref=copy_ref())
    assert "moves" not in json.loads(block.model_dump_json())
    assert "moves" not in block.model_dump()


def test_stored_turns_from_before_1_2_read_and_digest_as_they_did() -> None:
    lines = GOLDEN_TURNS.read_text(encoding="utf-8").splitlines()
    assert lines
    for stored in lines:
        turn = AssistantTurn.from_stored_json(stored)
        assert turn.to_stored_json() == stored
        assert digest(turn) == digest(json.loads(stored))


def test_a_1_1_turn_reads_and_digests_as_it_did() -> None:
    block = TransitionBlock(author="server", block_id="blk_x", text="Done.", copy_ref=copy_ref())
    stored = _turn(block, version="1.1").to_stored_json()
    turn = AssistantTurn.from_stored_json(stored)
    assert turn.schema_version == "1.1"
    assert turn.to_stored_json() == stored
    assert digest(turn) == digest(json.loads(stored))


def test_a_prose_finding_without_a_move_index_serializes_as_it_did() -> None:
    finding = ProseFinding(
        block="transition", check="guard", code="c.x", rule="r", replaced_by="server_copy"
    )
    assert "move" not in json.loads(finding.model_dump_json())
    on_move = finding.model_copy(update={"check": "moves", "move": 2})
    assert json.loads(on_move.model_dump_json())["move"] == 2
