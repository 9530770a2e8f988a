"""Wire rules (DESIGN §3): snake_case keys at every depth, lowercase enum values, stable codes."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from enum import Enum
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter

import turnframe_core
from turnframe_core import codes
from turnframe_core.blocks import ResponseBlock
from turnframe_core.commands import AtomicityScope, CommandOrigin
from turnframe_core.facts import NarratableFact
from turnframe_core.interactions import FreeformPolicy, StoredAction
from turnframe_core.replay import CommandOutcome
from turnframe_core.stream import StreamEvent

SNAKE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
UNIONS = [
    ResponseBlock,
    NarratableFact,
    CommandOrigin,
    StoredAction,
    FreeformPolicy,
    AtomicityScope,
    CommandOutcome,
    StreamEvent,
]


def core_models() -> list[type[BaseModel]]:
    models: dict[str, type[BaseModel]] = {}
    for info in pkgutil.iter_modules(turnframe_core.__path__):
        module = importlib.import_module(f"turnframe_core.{info.name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseModel) and obj.__module__.startswith("turnframe_core"):
                models[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [models[k] for k in sorted(models)]


def core_enums() -> list[type[Enum]]:
    found: dict[str, type[Enum]] = {}
    for info in pkgutil.iter_modules(turnframe_core.__path__):
        module = importlib.import_module(f"turnframe_core.{info.name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, Enum) and obj.__module__.startswith("turnframe_core"):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[k] for k in sorted(found)]


def schema_problems(schema: Any, path: str = "$") -> list[str]:
    """Every non-snake_case property key and every non-lowercase enum/const value in a schema."""
    problems: list[str] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict):
                problems += [f"{path}.properties.{name}" for name in value if not SNAKE.match(name)]
            if key == "enum" and isinstance(value, list):
                problems += [
                    f"{path}.enum={v!r}" for v in value if isinstance(v, str) and v != v.lower()
                ]
            if key == "const" and isinstance(value, str) and value != value.lower():
                problems.append(f"{path}.const={value!r}")
            problems += schema_problems(value, f"{path}.{key}")
    elif isinstance(schema, list):
        for index, item in enumerate(schema):
            problems += schema_problems(item, f"{path}[{index}]")
    return problems


def test_the_walk_covers_the_core_models():
    names = {m.__name__ for m in core_models()}
    assert {
        "AssistantTurn",
        "ReceiptBlock",
        "Interaction",
        "CommandEnvelope",
        "ReplayRecord",
        "WorkflowView",
        "Understanding",
        "DomainEvent",
    } <= names


@pytest.mark.parametrize("model", core_models(), ids=lambda m: m.__name__)
@pytest.mark.parametrize("mode", ["validation", "serialization"])
def test_every_model_schema_has_snake_case_keys_and_lowercase_enums(model, mode):
    assert schema_problems(model.model_json_schema(mode=mode)) == []


@pytest.mark.parametrize("union", UNIONS, ids=lambda u: str(u)[:40])
def test_every_union_schema_follows_the_wire_rules(union):
    assert schema_problems(TypeAdapter(union).json_schema(mode="serialization")) == []


@pytest.mark.parametrize("enum", core_enums(), ids=lambda e: e.__name__)
def test_every_enum_value_is_a_lowercase_string(enum):
    assert all(isinstance(m.value, str) and m.value == m.value.lower() for m in enum)


def test_the_walk_reports_a_camel_case_key_and_an_uppercase_enum():
    class Loud(str, Enum):  # noqa: UP042 - an enum breaking the rule on purpose
        ON = "ON"

    class Bad(BaseModel):
        camelCase: int  # noqa: N815 - a key breaking the rule on purpose
        level: Loud

    found = schema_problems(Bad.model_json_schema())
    assert any(p.endswith("properties.camelCase") for p in found)
    assert any("'ON'" in p for p in found)


def test_stable_codes_are_unique_and_dotted_lowercase():
    assert len(codes.ALL_CODES) == len(set(codes.ALL_CODES))
    assert all(re.fullmatch(r"turnframe(\.[a-z0-9_]+)+", c) for c in codes.ALL_CODES)


def test_every_error_class_carries_a_known_code():
    from turnframe_core.errors import TurnframeError

    for info in pkgutil.iter_modules(turnframe_core.__path__):
        module = importlib.import_module(f"turnframe_core.{info.name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, TurnframeError) and obj is not TurnframeError:
                assert obj.code in codes.ALL_CODES, obj
