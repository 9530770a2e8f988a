"""The assistant turn's schema version: written on every new turn, read back from storage by the
rules of docs/decisions/0007-turn-schema-version.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from turnframe_core import AssistantTurn, TurnStatus, codes
from turnframe_core.canonical import canonical_json
from turnframe_core.errors import TurnframeError
from turnframe_core.turn import TURN_SCHEMA_VERSION, UnsupportedSchemaVersion

#: Turns as the store kept them before the turn had a `schema_version` (one per line).
GOLDEN_1_0 = Path(__file__).resolve().parents[1] / "data" / "assistant_turns_1_0.jsonl"


def _golden() -> list[str]:
    return GOLDEN_1_0.read_text(encoding="utf-8").splitlines()


def _finished() -> AssistantTurn:
    started = AssistantTurn.begin(
        turn_id="turn_1", conversation_id="conv_1", account_id="acct_1", locale="en", created_at=10
    )
    return started.finish(TurnStatus.COMPLETED, at=20)


def _stored_as(version: str | None, **extra: Any) -> str:
    """A current turn's stored text with its version replaced (None: the key removed)."""
    data = json.loads(_finished().to_stored_json())
    data.pop("schema_version", None)
    if version is not None:
        data["schema_version"] = version
    data.update(extra)
    return canonical_json(data)


def test_the_current_schema_version_is_1_2() -> None:
    assert TURN_SCHEMA_VERSION == "1.2"


def test_a_new_turn_carries_the_current_schema_version() -> None:
    turn = _finished()

    assert turn.schema_version == TURN_SCHEMA_VERSION
    assert json.loads(turn.to_stored_json())["schema_version"] == TURN_SCHEMA_VERSION
    assert json.loads(turn.model_dump_json())["schema_version"] == TURN_SCHEMA_VERSION


def test_a_new_turn_reloads_with_its_version_byte_for_byte() -> None:
    stored = _finished().to_stored_json()

    reloaded = AssistantTurn.from_stored_json(stored)

    assert reloaded.schema_version == TURN_SCHEMA_VERSION
    assert reloaded.to_stored_json() == stored


def test_the_golden_turns_were_stored_without_a_version() -> None:
    assert len(_golden()) == 3
    assert all("schema_version" not in json.loads(text) for text in _golden())


@pytest.mark.parametrize("index", [0, 1, 2])
def test_a_turn_stored_before_the_version_existed_reads_as_1_0_byte_for_byte(index: int) -> None:
    stored = _golden()[index]

    turn = AssistantTurn.from_stored_json(stored)

    assert turn.schema_version == "1.0"
    assert turn.to_stored_json() == stored


def test_a_1_0_turn_keeps_its_version_through_python_and_json_round_trips() -> None:
    turn = AssistantTurn.from_stored_json(_golden()[1])

    assert AssistantTurn.model_validate(turn.model_dump()).schema_version == "1.0"
    assert AssistantTurn.model_validate_json(turn.model_dump_json()).schema_version == "1.0"


@pytest.mark.parametrize("version", ["2.0", "2.1", "0.9", "10.0"])
def test_a_stored_turn_of_an_unknown_major_version_is_refused_with_a_typed_error(
    version: str,
) -> None:
    with pytest.raises(UnsupportedSchemaVersion) as raised:
        AssistantTurn.from_stored_json(_stored_as(version))

    assert isinstance(raised.value, TurnframeError)
    assert raised.value.code == codes.TURN_UNSUPPORTED_SCHEMA_VERSION
    assert raised.value.version == version
    assert version in str(raised.value)


def test_an_unknown_major_version_is_refused_before_the_rest_of_the_turn_is_judged() -> None:
    # A 2.x turn may look nothing like this version's turn; the version alone decides.
    text = canonical_json({"schema_version": "2.0", "messages": [{"role": "assistant"}]})

    with pytest.raises(UnsupportedSchemaVersion):
        AssistantTurn.from_stored_json(text)


def test_an_unknown_major_version_is_refused_outside_storage_too() -> None:
    with pytest.raises(UnsupportedSchemaVersion):
        AssistantTurn.model_validate_json(_stored_as("2.0"))
    with pytest.raises(UnsupportedSchemaVersion):
        AssistantTurn.model_validate(json.loads(_stored_as("3.4")))


def test_a_newer_minor_version_reads_and_keeps_its_unknown_blocks_and_fields() -> None:
    data = json.loads(_stored_as("1.7", mood={"tone": "calm"}))
    data["blocks"] = [{"kind": "poll", "block_id": "blk_future", "choices": ["a", "b"]}]
    stored = canonical_json(data)

    turn = AssistantTurn.from_stored_json(stored)

    assert turn.schema_version == "1.7"
    assert turn.has_unknown_blocks
    assert turn.to_stored_json() == stored


def test_a_field_this_version_does_not_know_is_refused_at_a_known_version() -> None:
    for version in (None, "1.0", TURN_SCHEMA_VERSION):
        with pytest.raises(ValidationError):
            AssistantTurn.from_stored_json(_stored_as(version, mood="calm"))


def test_a_newer_minor_version_is_read_only_from_storage() -> None:
    with pytest.raises(ValidationError):
        AssistantTurn.model_validate_json(_stored_as("1.7"))
    with pytest.raises(ValidationError):
        AssistantTurn.model_validate({**_finished().model_dump(), "schema_version": "1.7"})


@pytest.mark.parametrize("version", ["1", "v1.1", "1.1.0", "01.1", "1.01", "", " 1.1", 1.1, 1])
def test_a_malformed_schema_version_is_refused(version: object) -> None:
    data = json.loads(_stored_as(None))
    data["schema_version"] = version

    with pytest.raises(ValidationError):
        AssistantTurn.from_stored_json(json.dumps(data))


def test_an_explicit_1_0_is_not_the_canonical_form_of_a_1_0_turn() -> None:
    # 1.0 is the version without the key: a text that spells it out does not reload byte for byte
    # (a store reports that as Corrupt).
    stored = _stored_as("1.0")

    assert AssistantTurn.from_stored_json(stored).to_stored_json() != stored
