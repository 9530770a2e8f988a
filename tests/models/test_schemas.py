"""The schemas a model answers in close every choice on what its request offers, and an answer
past the caps is a typed failure before any rule reads it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from turnframe_core import Brief, ValueKind, ValueRule
from turnframe_core.blocks import MalformedModelOutput
from turnframe_core.limits import MAX_MODEL_OUTPUT_CHARS
from turnframe_core.moves import MoveKind, Referable, ReferableKind
from turnframe_core.understanding import OfferedCard, OfferedHandle, OfferedOperation
from turnframe_runtime import TransitionRequest
from turnframe_runtime.models import draft_schema, understanding_schema
from turnframe_runtime.models._schema import decode


def _enums(schema: Any, key: str) -> set[str]:
    """Every enum value offered under property `key`, anywhere in the schema."""
    found: set[str] = set()
    if isinstance(schema, dict):
        for name, sub in schema.items():
            if name == key and isinstance(sub, dict):
                found |= set(map(str, sub.get("enum", [])))
                found |= _enums(sub.get("items", {}), "__self__")
            found |= _enums(sub, key)
    elif isinstance(schema, list):
        for sub in schema:
            found |= _enums(sub, key)
    return found


def test_a_brief_that_offers_nothing_offers_no_act() -> None:
    schema = understanding_schema(Brief(text="hello", locale="en"))
    assert "acts" not in schema["properties"]
    assert "card_answers" not in schema["properties"]


def test_the_understanding_schema_names_only_the_offered_operations_handles_and_values() -> None:
    brief = Brief(
        text="hello",
        locale="en",
        handles=(OfferedHandle(handle="h1", label="Rome", workflow="trip"),),
        operations=(
            OfferedOperation(
                operation="trip.rebook",
                arguments=("leg", "on"),
                rules={
                    "leg": ValueRule(kind=ValueKind.ENUM, choices=("outbound", "return")),
                    "on": ValueRule(kind=ValueKind.DATE),
                },
            ),
        ),
        card_on_screen=OfferedCard(
            interaction_id="int_1", option_ids=("opt_a",), accepts_text=True
        ),
    )
    schema = understanding_schema(brief)
    assert _enums(schema, "operation") == {"trip.rebook"}
    assert _enums(schema, "handle") == {"h1"}
    assert _enums(schema, "name") == {"leg", "on"}
    assert _enums(schema, "option_id") == {"opt_a"}
    values = json.dumps(schema)
    assert '"enum": ["outbound", "return"]' in values and '"format": "date"' in values


def test_the_moves_schema_names_only_the_turns_refs_and_phrasings() -> None:
    request = TransitionRequest(
        locale="en",
        refs=(Referable(ref="blk_1", kind=ReferableKind.RECEIPT, says="Saved"),),
        moves=(MoveKind.ACKNOWLEDGE, MoveKind.INTRODUCE, MoveKind.STATE),
        variants={"acknowledge": 2, "introduce": 3, "state": 3},
    )
    schema = draft_schema(request, structured=True)
    assert _enums(schema, "move") == {"acknowledge", "introduce"}  # no fact to state
    assert _enums(schema, "ref") == {"blk_1"}
    assert _enums(schema, "variant") == {"0", "1", "2"}


@pytest.mark.parametrize(
    "answer", [None, "", "not json", "[" * 5000, json.dumps("x" * (MAX_MODEL_OUTPUT_CHARS + 1))]
)
def test_an_answer_that_is_no_json_within_the_caps_is_malformed(answer: str | None) -> None:
    with pytest.raises(MalformedModelOutput):
        decode(answer)


def test_the_adapters_use_only_the_cores_public_modules() -> None:
    """The caps the adapters check a model's answer with come from `turnframe_core.limits`,
    a module an adopter's own adapter may import too; none reaches into a private one."""
    import ast
    from pathlib import Path

    import turnframe_runtime.models as models

    private = [
        (path.name, node.module)
        for path in sorted(Path(models.__file__).parent.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text("utf-8")))
        if isinstance(node, ast.ImportFrom)
        and node.module
        and node.module.startswith("turnframe_core.")
        and any(part.startswith("_") for part in node.module.split("."))
    ]
    assert private == []
