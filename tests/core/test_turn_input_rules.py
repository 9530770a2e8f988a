"""What a user sends is refused unless it is exactly what it claims to be: strict whole numbers, a
BCP 47 locale, bounded attachments. Every refusal is `InvalidTurnInput` (one code), whether the
input is built in code, from a dict or from JSON, and it never repeats the refused value."""

from __future__ import annotations

import json
import string
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnframe_core import InteractionResponse, TurnInput, codes
from turnframe_core.cases import CaseRef
from turnframe_core.turn import MAX_ATTACHMENTS, AttachmentRef, InvalidTurnInput

BASE: dict[str, Any] = {"account_id": "acct_1", "conversation_id": "conv_1"}


def _click(revision: object) -> dict[str, Any]:
    answer = {"interaction_id": "int_1", "option_id": "opt_yes", "expected_case_revision": revision}
    return {**BASE, "interaction_response": answer}


def _attachment(index: int = 0, **fields: Any) -> dict[str, Any]:
    return {"attachment_id": f"att_{index}", "media_type": "image/png", **fields}


# --- whole numbers ------------------------------------------------------------------------------


@pytest.mark.parametrize("revision", ["3", 3.0, True, False, -1, 2**63, None, [3]])
def test_a_card_answers_revision_is_a_whole_number_and_nothing_else(revision: object) -> None:
    with pytest.raises(InvalidTurnInput):
        TurnInput.model_validate(_click(revision))


@pytest.mark.parametrize("revision", ['"3"', "3.0", "true", "1e3", "-1"])
def test_a_card_answers_revision_in_json_is_a_json_integer(revision: str) -> None:
    text = json.dumps(_click(0)).replace(
        '"expected_case_revision": 0', f'"expected_case_revision": {revision}'
    )

    with pytest.raises(InvalidTurnInput):
        TurnInput.model_validate_json(text)


def test_a_card_answer_built_alone_refuses_a_numeric_string_revision_too() -> None:
    with pytest.raises(InvalidTurnInput):
        InteractionResponse(
            interaction_id="int_1",
            option_id="opt_yes",
            expected_case_revision="3",  # type: ignore[arg-type]
        )


@pytest.mark.parametrize("revision", [0, 3, 2**63 - 1])
def test_a_whole_revision_up_to_the_stores_largest_integer_is_accepted(revision: int) -> None:
    turn = TurnInput.model_validate(_click(revision))

    assert turn.interaction_response is not None
    assert turn.interaction_response.expected_case_revision == revision


@pytest.mark.parametrize("revision", ["3", 3.0, True])
def test_a_case_reference_refuses_a_revision_that_is_not_an_int(revision: object) -> None:
    with pytest.raises(ValueError):
        CaseRef(workflow="trip", case_id="T-1", expected_revision=revision)  # type: ignore[arg-type]


@pytest.mark.parametrize("size", ["10", 10.0, True, -1, 2**63])
def test_an_attachments_size_is_a_whole_number(size: object) -> None:
    with pytest.raises(InvalidTurnInput):
        TurnInput.model_validate({**BASE, "attachments": [_attachment(size_bytes=size)]})


# --- locale -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "locale",
    ["en", "it", "en-GB", "EN-gb", "zh-Hant-TW", "es-419", "sr-Latn-RS", "de-CH-1996",
     "en-US-u-ca-gregory", "en-x-twain", "yue-HK", "zh-yue-HK"],
)  # fmt: skip
def test_a_bcp_47_locale_is_accepted(locale: str) -> None:
    assert TurnInput(**BASE, text="hi", locale=locale).locale == locale


@pytest.mark.parametrize(
    "locale",
    ["", "../../x", "en\x00", "en\x00-GB", "en_US", "en-", "-en", "e", "en--GB", "en GB",
     "en/GB", "en-GB\n", "ènglish", "en-" + "a" * 9, "en-GB-" + "-".join(["1996"] * 8), "12"],
)  # fmt: skip
def test_a_locale_that_is_not_bcp_47_is_refused(locale: str) -> None:
    with pytest.raises(InvalidTurnInput) as raised:
        TurnInput(**BASE, text="hi", locale=locale)

    assert raised.value.code == codes.TURN_INVALID_INPUT


def test_a_locale_is_at_most_35_characters() -> None:
    tag = "en-GB-" + "-".join(["abcde"] * 5)  # 35 characters, well formed
    assert len(tag) == 35
    TurnInput(**BASE, text="hi", locale=tag)

    with pytest.raises(InvalidTurnInput):
        TurnInput(**BASE, text="hi", locale=tag + "f")


@given(st.text(max_size=40))
def test_an_accepted_locale_holds_only_ascii_letters_digits_and_hyphens(locale: str) -> None:
    try:
        accepted = TurnInput(**BASE, text="hi", locale=locale)
    except InvalidTurnInput:
        return
    allowed = set(string.ascii_letters + string.digits + "-")
    assert set(accepted.locale) <= allowed
    assert 2 <= len(accepted.locale) <= 35
    assert ".." not in accepted.locale and "/" not in accepted.locale


# --- attachments --------------------------------------------------------------------------------


def test_a_turn_takes_at_most_twenty_attachments() -> None:
    assert MAX_ATTACHMENTS == 20
    most = [_attachment(i) for i in range(MAX_ATTACHMENTS)]
    assert len(TurnInput.model_validate({**BASE, "attachments": most}).attachments) == 20

    with pytest.raises(InvalidTurnInput):
        TurnInput.model_validate({**BASE, "attachments": [*most, _attachment(99)]})


def test_a_hundred_thousand_attachments_are_refused() -> None:
    flood = [_attachment(i) for i in range(100_000)]

    with pytest.raises(InvalidTurnInput):
        TurnInput.model_validate({**BASE, "attachments": flood})


@pytest.mark.parametrize("source", ["python", "json"])
def test_too_many_bad_attachments_are_refused_as_one_count_not_one_by_one(source: str) -> None:
    # Judging each would cost per item (and listing the refusals once cost quadratic time).
    flood = [{"attachment_id": "", "media_type": "x"}] * 100_000
    data = {**BASE, "attachments": flood}
    with pytest.raises(InvalidTurnInput) as refused:
        if source == "json":
            TurnInput.model_validate_json(json.dumps(data))
        else:
            TurnInput.model_validate(data)
    assert refused.value.fields == ("attachments",)


@pytest.mark.parametrize(
    "fields",
    [
        {"attachment_id": ""},
        {"attachment_id": "a" * 201},
        {"attachment_id": "att 1"},
        {"attachment_id": "att\x001"},
        {"media_type": "png"},
        {"media_type": "image/png; charset=x"},
        {"media_type": "image/" + "p" * 300},
        {"filename": "../../etc/passwd"},
        {"filename": "a\\b.png"},
        {"filename": "a\x00.png"},
        {"filename": "line\nbreak.png"},
        {"filename": "x" * 256},
    ],
)
def test_an_attachment_reference_is_bounded_and_plain(fields: dict[str, Any]) -> None:
    with pytest.raises(InvalidTurnInput):
        AttachmentRef.model_validate(_attachment(**fields))
    with pytest.raises(InvalidTurnInput):
        TurnInput.model_validate({**BASE, "attachments": [_attachment(**fields)]})


def test_a_plain_attachment_reference_is_accepted() -> None:
    ref = AttachmentRef(
        attachment_id="att_01J:scan-1", media_type="Image/PNG", filename="scan 1.png", size_bytes=0
    )

    assert ref.filename == "scan 1.png"


# --- one typed answer ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        {**BASE, "text": "x" * 20_001},
        {**BASE, "text": "hi", "surprise": 1},
        {**BASE, "text": "hi", "account_id": "acct 1"},
        {**BASE, "text": 42},
        {"text": "hi"},
        {**BASE, "text": "   "},
    ],
)
def test_every_refusal_of_a_turn_input_is_invalid_turn_input(data: dict[str, Any]) -> None:
    with pytest.raises(InvalidTurnInput) as raised:
        TurnInput.model_validate(data)
    with pytest.raises(InvalidTurnInput):
        TurnInput.model_validate_json(json.dumps(data))

    assert raised.value.code == codes.TURN_INVALID_INPUT


def test_a_refusal_names_the_fields_but_never_the_values() -> None:
    secret = "../../private-9f3e"

    with pytest.raises(InvalidTurnInput) as raised:
        TurnInput.model_validate({**_click("71234"), "locale": secret})

    message = str(raised.value)
    assert "locale" in message and "expected_case_revision" in message
    assert secret not in message and "71234" not in message
    assert set(raised.value.fields) == {"locale", "interaction_response.expected_case_revision"}


def test_too_many_attachments_from_a_generator_are_refused_without_reading_them_all() -> None:
    read = []

    def flood():
        for i in range(100_000):
            read.append(i)
            yield {"attachment_id": "", "media_type": "x"}

    with pytest.raises(InvalidTurnInput) as refused:
        TurnInput.model_validate({**BASE, "attachments": flood()})
    assert refused.value.fields == ("attachments",)
    assert len(read) == MAX_ATTACHMENTS + 1
