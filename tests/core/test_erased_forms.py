"""The erased form of each stored document (turnframe_core.erasure): words gone, shape, ids and
digests kept, erasing twice the same as once; a sealed record's digest survives erasure and
still covers every field erasure keeps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from turnframe_core.blocks import STORED_CONTEXT, AnswerBlock, ArtifactBlock, CopyRef
from turnframe_core.erasure import (
    ERASED,
    ERASED_URI,
    erase_input,
    erase_record,
    erase_reply,
    erase_value,
    is_erased_form,
)
from turnframe_core.interactions import InteractionResponse, InteractionStatus
from turnframe_core.replay import (
    PERSONAL_RECORD_FIELDS,
    SEALED_DIGEST_SCHEME,
    CopyRender,
    ReplayRecord,
    TurnPhase,
)
from turnframe_core.turn import AssistantTurn, AttachmentRef, TurnInput, TurnStatus
from turnframe_store import builders as build

DATA = Path(__file__).resolve().parents[1] / "data"
WORDS = "Ada Lovelace, 12 Baker Street"


def _sealed(**changes: object) -> ReplayRecord:
    record = build.replay_record("turn_1", phase=TurnPhase.DELIVERED)
    said = TurnInput(account_id=record.account_id, conversation_id=record.conversation_id,
                     turn_id="turn_1", text=WORDS)  # fmt: skip
    return record.model_copy(
        update={
            "digest_scheme": SEALED_DIGEST_SCHEME,
            "input": said,
            "understanding": {"acts": [{"name": WORDS}]},
            "reduction_plan": {"set": WORDS},
            "copy_renders": (),
            "failure_code": None,
            **changes,
        }
    )


def test_erasing_a_sealed_record_keeps_its_digest_and_removes_its_words() -> None:
    record = _sealed()

    erased = erase_record(record, at=99)

    assert erased.digest() == record.digest()
    assert WORDS not in erased.model_dump_json()
    assert erased.input.text == ERASED and erased.understanding is None
    assert set(erased.erased) == set(PERSONAL_RECORD_FIELDS) and erased.erased_at == 99
    assert is_erased_form(erased) and not is_erased_form(record)
    assert erase_record(erased, at=500) == erased  # idempotent, the first time kept


def test_a_sealed_digest_still_covers_what_erasure_keeps_and_what_it_held() -> None:
    record = _sealed()
    erased = erase_record(record, at=99)
    forged = "sha256:" + "0" * 64

    moved = erased.model_copy(update={"event_ids": ("evt_forged",)})
    forged_digest = erased.model_copy(update={"erased": {**erased.erased, "input": forged}})
    other_words = _sealed(understanding={"acts": [{"name": "someone else"}]})
    words_back = erased.model_copy(update={"understanding": {"acts": [{"name": "someone else"}]}})
    new_text = erased.input.model_copy(update={"text": "other words"})
    text_back = erased.model_copy(update={"input": new_text})

    for altered in (moved, forged_digest, other_words, words_back, text_back):
        assert altered.digest() != record.digest()
    assert not is_erased_form(words_back) and not is_erased_form(text_back)


def test_a_record_never_erased_cannot_carry_a_kept_digest() -> None:
    record = _sealed()
    kept = {"input": erase_record(record, at=1).erased["input"]}

    with pytest.raises(ValueError, match="erased digests"):
        ReplayRecord.model_validate({**dict(record), "erased": kept})
    with pytest.raises(ValueError, match="erased digests"):
        ReplayRecord.model_validate({**dict(record), "erased_at": 5})


def test_a_record_sealed_before_scheme_two_keeps_its_whole_digest_when_erased() -> None:
    legacy = build.replay_record("turn_1", phase=TurnPhase.DELIVERED)
    assert legacy.digest_scheme == 1

    erased = erase_record(legacy, at=7)

    assert erased.digest() == legacy.digest() and set(erased.erased) == {"record"}
    assert is_erased_form(erased)


def test_new_fields_at_their_defaults_leave_stored_records_digesting_as_before() -> None:
    for line in (DATA / "replay_records_1_0.jsonl").read_text(encoding="utf-8").splitlines():
        stored = ReplayRecord.model_validate_json(line, context=STORED_CONTEXT)
        assert json.loads(stored.model_dump_json()).keys() == json.loads(line).keys()
        erased = erase_record(stored, at=1)
        assert erased.digest() == stored.digest() and is_erased_form(erased)


def test_every_stored_reply_erases_to_its_blocks_ids_and_kinds_without_words() -> None:
    for line in (DATA / "assistant_turns_1_0.jsonl").read_text(encoding="utf-8").splitlines():
        turn = AssistantTurn.model_validate_json(line, context=STORED_CONTEXT)
        erased = erase_reply(turn)
        assert [(b.block_id, b.kind, b.author) for b in erased.blocks] == [
            (b.block_id, b.kind, b.author) for b in turn.blocks
        ]
        assert erase_reply(erased) == erased
        for block in erased.blocks:
            for field in ("text", "title", "body"):
                value = getattr(block, field, None)
                assert value in (None, ERASED), (block.kind, field, value)


def test_an_artifact_keeps_a_controlled_reference_once_erased() -> None:
    started = AssistantTurn.begin(turn_id="turn_1", conversation_id="conv_1",
                                  account_id="acct_1", locale="en", created_at=1)  # fmt: skip
    blocks = (
        AnswerBlock(block_id="blk_answer", text=f"Sent to {WORDS}"),
        ArtifactBlock(block_id="blk_file", artifact_id="a1", media_type="application/pdf",
                      name="ada-passport.pdf", uri_ref="https://files.example.com/ada.pdf"),
    )  # fmt: skip
    turn = started.finish(TurnStatus.COMPLETED, at=2, blocks=blocks)

    erased = erase_reply(turn)

    answer, artifact = erased.blocks
    assert isinstance(artifact, ArtifactBlock) and isinstance(answer, AnswerBlock)
    assert (artifact.name, artifact.uri_ref, artifact.artifact_id) == (ERASED, ERASED_URI, "a1")
    assert answer.text == ERASED


def test_a_users_turn_loses_its_words_and_keeps_what_it_answered() -> None:
    said = TurnInput(
        account_id="acct_1",
        conversation_id="conv_1",
        turn_id="turn_1",
        text=WORDS,
        interaction_response=InteractionResponse(
            interaction_id="int_1", option_id="opt_yes", expected_case_revision=3,
            freeform_input=WORDS,
        ),
        attachments=(AttachmentRef(attachment_id="att-1", media_type="image/png",
                                   filename="ada.png"),),
    )  # fmt: skip

    erased = erase_input(said)

    assert WORDS not in erased.model_dump_json() and "ada.png" not in erased.model_dump_json()
    response = erased.interaction_response
    assert response is not None
    assert (response.interaction_id, response.option_id) == ("int_1", "opt_yes")
    assert erased.attachments[0].attachment_id == "att-1"
    assert erase_input(erased) == erased


@pytest.mark.parametrize(
    ("value", "erased"),
    [
        ({"name": WORDS, "seats": 2, "vip": True, "legs": ["out", 3]},
         {"name": ERASED, "seats": None, "vip": None, "legs": [ERASED, None]}),
        ([], []),
        ({}, {}),
    ],
)  # fmt: skip
def test_a_payload_keeps_its_keys_and_shape_and_loses_every_value(value, erased) -> None:
    assert erase_value(value) == erased
    assert erase_value(erased) == erased


def test_copy_renders_are_personal_and_erased() -> None:
    render = CopyRender(
        template_id="trip.name_set",
        params={"name": WORDS},
        text=f"Name set to {WORDS}",
        copy_ref=CopyRef(
            template_id="trip.name_set",
            template_version="1",
            locale="en",
            catalog_digest="sha256:" + "1" * 64,
        ),
    )
    record = _sealed(copy_renders=(render,))

    erased = erase_record(record, at=3)

    assert erased.copy_renders == () and erased.digest() == record.digest()


def test_a_block_of_an_unknown_kind_keeps_only_its_kind_and_id() -> None:
    stored = {
        "schema_version": "1.9",
        "turn_id": "turn_1",
        "conversation_id": "conv_1",
        "account_id": "acct_1",
        "status": "completed",
        "locale": "en",
        "replay_token": AssistantTurn.begin(
            turn_id="turn_1", conversation_id="conv_1", account_id="acct_1", locale="en",
            created_at=1,
        ).replay_token,
        "created_at": 1,
        "completed_at": 2,
        "blocks": [{"kind": "map", "block_id": "blk_m", "caption": f"{WORDS}'s route", "n": 3}],
    }  # fmt: skip
    turn = AssistantTurn.model_validate(stored, context={"turnframe_stored": True})

    erased = erase_reply(turn)

    [block] = erased.model_dump(mode="json")["blocks"]
    assert block == {"kind": "map", "block_id": "blk_m", "caption": ERASED, "n": None}
    assert erase_reply(erased) == erased


def test_a_cards_own_metadata_is_erased_with_its_words() -> None:
    from turnframe_core.erasure import erase_card
    from turnframe_core.interactions import (
        ApplyOperation,
        DeclineCommands,
        Interaction,
        InteractionKind,
        InteractionOption,
        InteractionPayload,
    )

    payload = InteractionPayload(
        title=f"Send {WORDS}'s form?",
        options=(InteractionOption(option_id="opt_yes", label="Send",
                                   action=ApplyOperation(operation="trip.send",
                                                         arguments={"to": WORDS})),
                 InteractionOption(option_id="opt_no", label=f"Not to {WORDS}",
                                   action=DeclineCommands())),
        metadata={"customer": WORDS},
    )  # fmt: skip
    card = Interaction.create(
        interaction_id="int_1", account_id="acct_1", conversation_id="conv_1",
        case_ref=_case(),
        kind=InteractionKind.CONFIRM_COMMAND, payload=payload, created_by_turn="turn_1",
        created_at=1,
    ).transition(InteractionStatus.RESOLVING, at=2, option_id="opt_yes").transition(
        InteractionStatus.RESOLVED, at=3
    )  # fmt: skip

    erased = erase_card(card)

    assert WORDS not in erased.model_dump_json()
    assert (erased.status, erased.resolved_option_id) == (card.status, "opt_yes")
    assert erase_card(erased) == erased


def _case() -> Any:
    from turnframe_core.cases import CaseRef

    return CaseRef(workflow="trip", case_id="T-1", expected_revision=1)
