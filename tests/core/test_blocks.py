import pytest
from pydantic import TypeAdapter, ValidationError

from turnframe_core import codes
from turnframe_core.blocks import (
    STORED_CONTEXT,
    AnswerBlock,
    ArtifactBlock,
    ForbiddenAuthorship,
    InteractionBlock,
    MalformedModelOutput,
    NoticeBlock,
    ReceiptBlock,
    ResponseBlock,
    TransitionBlock,
    UnknownBlock,
    parse_model_output,
)
from turnframe_core.derive import derive_receipt_id
from turnframe_test.builders import confirm_card, copy_ref, receipt_block

blocks = TypeAdapter(ResponseBlock)


@pytest.mark.parametrize("kind", ["receipt", "notice", "interaction", "artifact"])
def test_model_output_of_a_server_kind_is_rejected_naming_the_kind(kind):
    with pytest.raises(ForbiddenAuthorship) as info:
        parse_model_output(
            [{"kind": "answer", "text": "ok"}, {"kind": kind, "text": "x"}],
            turn_id="turn_1",
            account_id="acct_1",
        )
    assert info.value.kind == kind
    assert info.value.index == 1
    assert repr(kind) in str(info.value)
    assert info.value.code == codes.AUTHORSHIP_FORBIDDEN_KIND


def test_model_output_of_an_unknown_kind_is_rejected():
    with pytest.raises(ForbiddenAuthorship) as info:
        parse_model_output('{"kind": "poll", "text": "x"}', turn_id="turn_1", account_id="acct_1")
    assert info.value.kind == "poll"


def test_model_output_may_not_choose_its_block_id_or_author():
    with pytest.raises(MalformedModelOutput):
        parse_model_output(
            [{"kind": "answer", "text": "x", "author": "server"}],
            turn_id="turn_1",
            account_id="acct_1",
        )
    with pytest.raises(MalformedModelOutput):
        parse_model_output(
            [{"kind": "transition", "text": "x", "block_id": "blk_x"}],
            turn_id="turn_1",
            account_id="acct_1",
        )


def test_model_output_that_is_not_json_is_malformed_and_not_echoed():
    with pytest.raises(MalformedModelOutput) as info:
        parse_model_output("secret words {", turn_id="turn_1", account_id="acct_1")
    assert "secret" not in str(info.value)


def test_model_output_parses_into_answer_and_transition_blocks_with_derived_ids():
    parsed = parse_model_output(
        [
            {"kind": "answer", "question_id": "q1", "text": "Yes."},
            {"kind": "transition", "text": "Done."},
        ],
        turn_id="turn_1",
        account_id="acct_1",
    )
    again = parse_model_output(
        [
            {"kind": "answer", "question_id": "q1", "text": "Yes."},
            {"kind": "transition", "text": "Done."},
        ],
        turn_id="turn_1",
        account_id="acct_1",
    )
    assert [type(b) for b in parsed] == [AnswerBlock, TransitionBlock]
    assert [b.author for b in parsed] == ["model", "model"]
    assert parsed == again


@pytest.mark.parametrize(
    ("kind", "author"),
    [("answer", "server"), ("transition", "server"), ("receipt", "model"), ("notice", "model")],
)
def test_authorship_is_fixed_by_kind(kind, author):
    data = {
        "answer": {"kind": "answer", "block_id": "blk_1", "text": "x"},
        "transition": {"kind": "transition", "block_id": "blk_1", "text": "x"},
        "receipt": receipt_block().model_dump(mode="json"),
        "notice": {
            "kind": "notice",
            "block_id": "blk_1",
            "code": "turnframe.notice.x",
            "text": "x",
            "copy_ref": copy_ref().model_dump(),
        },
    }[kind]
    blocks.validate_python(data)
    with pytest.raises(ValidationError):
        blocks.validate_python({**data, "author": author})


def test_a_receipt_cannot_exist_without_events():
    data = receipt_block().model_dump(mode="json")
    data["event_ids"] = []
    with pytest.raises(ValidationError):
        ReceiptBlock.model_validate(data)


def test_a_receipt_id_must_be_derived_from_its_events():
    data = receipt_block(("evt_1",)).model_dump(mode="json")
    data["event_ids"] = ["evt_2"]
    with pytest.raises(ValidationError):
        ReceiptBlock.model_validate(data)
    data["receipt_id"] = derive_receipt_id(data["status_code"], ["evt_2"])
    assert ReceiptBlock.model_validate(data).event_ids == ("evt_2",)


def test_an_interaction_block_never_carries_the_stored_action():
    card = confirm_card()
    block = InteractionBlock.from_view("blk_card", card.view())
    dumped = block.model_dump_json()
    assert "confirm_commands" not in dumped
    assert "cmd_1" not in dumped
    assert '"action"' not in dumped
    assert [o.option_id for o in block.options] == ["opt_confirm", "opt_decline"]


@pytest.mark.parametrize(
    "uri",
    [
        "javascript:alert(1)",
        "file:///etc/passwd",
        "data:text/html,<b>x</b>",
        "JAVASCRIPT:x",
        "http://example.com/x",
        " https://x",
        "https://x/\nfoo",
    ],
)
def test_an_artifact_refuses_uncontrolled_references(uri):
    with pytest.raises(ValidationError):
        ArtifactBlock(
            block_id="blk_a",
            artifact_id="a1",
            media_type="application/pdf",
            name="x.pdf",
            uri_ref=uri,
        )


def test_an_artifact_accepts_https_and_artifact_references():
    for uri in ("https://files.example.com/a.pdf", "artifact:itinerary/123"):
        assert (
            ArtifactBlock(
                block_id="blk_a",
                artifact_id="a1",
                media_type="application/pdf",
                name="x.pdf",
                uri_ref=uri,
            ).uri_ref
            == uri
        )


def test_an_unknown_stored_kind_is_read_as_opaque_and_written_back_unchanged():
    stored = {"kind": "poll", "block_id": "blk_9", "question": "?", "nested": {"b": 1, "a": 2}}
    block = blocks.validate_python(stored, context=STORED_CONTEXT)
    assert isinstance(block, UnknownBlock)
    assert blocks.dump_python(block, mode="json") == stored


def test_an_unknown_kind_can_never_be_authored():
    with pytest.raises(ValidationError):
        blocks.validate_python({"kind": "poll", "block_id": "blk_9"})
    with pytest.raises(ValidationError):
        UnknownBlock(kind="poll", raw={"kind": "poll"})


def test_an_unknown_reading_cannot_disguise_a_known_kind():
    with pytest.raises(ValidationError):
        UnknownBlock.model_validate(
            {"kind": "receipt", "block_id": "blk_1"}, context=STORED_CONTEXT
        )


def test_a_notice_code_must_be_a_dotted_lowercase_code():
    with pytest.raises(ValidationError):
        NoticeBlock(block_id="blk_n", code="Command Failed", text="x", copy_ref=copy_ref())


def test_a_draft_handed_over_as_an_object_has_its_text_capped_too() -> None:
    import pytest

    from turnframe_core.blocks import MAX_PROSE_CHARS, MalformedModelOutput, parse_model_output

    fits = {"kind": "transition", "text": "x" * MAX_PROSE_CHARS}
    assert parse_model_output(fits, turn_id="turn_1", account_id="acct_1")
    with pytest.raises(MalformedModelOutput):
        parse_model_output({**fits, "text": "x" * (MAX_PROSE_CHARS + 1)}, turn_id="turn_1",
                           account_id="acct_1")  # fmt: skip
