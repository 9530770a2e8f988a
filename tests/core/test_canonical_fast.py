"""Canonical JSON's fast path (orjson) writes what the reference encoder writes, byte for byte,
and fails where it fails with the same error; values it might write differently go to the
reference (turnframe_core/canonical.py)."""

import base64
import enum
import hashlib
import json
import uuid
from collections import OrderedDict
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from turnframe_core.canonical import (
    CanonicalJsonError,
    _fast_bytes,
    canonical_bytes,
    canonical_json,
    digest,
)
from turnframe_core.ids import derive_id

DATA = Path(__file__).resolve().parents[1] / "data"


def _nested(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(type(value).__name__)


#: the reference: the standard library's encoder, set up as canonical.py had it before the fast
#: path, with the same translation of its errors
_REFERENCE = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_nested
)


def reference_json(value: Any) -> str:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    try:
        return _REFERENCE.encode(value)
    except (TypeError, ValueError) as exc:
        reason = type(exc).__name__
        raise CanonicalJsonError(f"value has no canonical JSON form ({reason})") from None


def reference_bytes(value: Any) -> bytes:
    try:
        return reference_json(value).encode("utf-8")
    except UnicodeEncodeError:
        raise CanonicalJsonError("value has no canonical JSON form (a lone surrogate)") from None


def _outcome(encode: Any, value: Any) -> tuple[str, Any]:
    try:
        return ("ok", encode(value))
    except CanonicalJsonError as exc:
        return ("refused", str(exc))


def assert_same_as_reference(value: Any) -> None:
    assert _outcome(canonical_bytes, value) == _outcome(reference_bytes, value)
    assert _outcome(canonical_json, value) == _outcome(reference_json, value)


def _golden_values() -> list[Any]:
    values: list[Any] = []
    for path in sorted(DATA.glob("*.jsonl")):
        values += [json.loads(line) for line in path.read_text("utf-8").splitlines() if line]
    stored = json.loads((DATA / "inputs_before_strict_rules.json").read_text("utf-8"))
    values += [json.loads(text) for texts in stored.values() for text in texts]
    return values


GOLDEN = _golden_values()


def test_the_golden_corpus_is_written_alike_and_by_the_fast_path():
    assert len(GOLDEN) > 200
    for value in GOLDEN:
        fast = _fast_bytes(value)
        assert fast is not None  # the corpus holds no float: orjson wrote it
        assert fast == reference_bytes(value)
        assert_same_as_reference(value)


def test_stored_turns_and_records_are_their_own_canonical_text():
    for name in ("assistant_turns_1_0.jsonl", "replay_records_1_0.jsonl"):
        for line in (DATA / name).read_text("utf-8").splitlines():
            assert canonical_bytes(json.loads(line)) == line.encode("utf-8")


def test_keys_sort_by_code_point_across_the_planes():
    value = {"\U0001f600": 1, "\uffff": 2, "\ue000": 3, "z": 4, "é": 5, "": 6, "Z": 7}
    assert _fast_bytes(value) is not None
    expected = '{"":6,"Z":7,"z":4,"é":5,"\ue000":3,"\uffff":2,"\U0001f600":1}'
    assert canonical_json(value) == expected == reference_json(value)


def test_control_characters_are_escaped_as_the_reference_does():
    value = {"k": "".join(map(chr, range(0x00, 0x80))) + "\u2028\u2029\x85\ufeff"}
    assert _fast_bytes(value) is not None
    assert canonical_bytes(value) == reference_bytes(value)


class Colour(enum.Enum):
    RED = 1


class Shade(enum.StrEnum):
    DARK = "dark"


class Level(enum.IntEnum):
    HIGH = 3


class Text(str):
    pass


class Number(int):
    pass


class Reordered(dict[str, Any]):
    def items(self) -> Any:  # the reference encoder asks a dict subclass for its items
        return [("z", 0)]


class Ref(BaseModel):
    case_id: str
    weight: float = 0.5


def _circular() -> list[Any]:
    value: list[Any] = []
    value.append(value)
    return value


def _deep(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


UNUSUAL = [
    1.5,
    {"a": 1.0},
    [1e16, 1e-7, -0.0, 123456789012345678.0, 5e-324],
    {"nan": float("nan")},
    [float("inf")],
    [float("-inf")],
    {1: "int key"},
    {True: "bool key", None: "none key"},
    {1.5: "float key"},
    {1: "a", "b": 2},  # keys the reference cannot sort
    {"\ud800": 1},
    ["lone \udfff surrogate"],
    2**63,
    2**64,
    -(2**63),
    -(2**63) - 1,
    [10**40, -(10**40)],
    (1, "tuple", None),
    {"t": ("a", ("b",))},
    Colour.RED,
    [Shade.DARK],
    {"level": Level.HIGH},
    {"id": uuid.UUID(int=7)},
    [date(2026, 1, 1)],
    {Text("k"): Text("v")},
    [Number(5)],
    OrderedDict([("b", 1), ("a", 2)]),
    Reordered(a=1),
    {"ref": Ref(case_id="T-1")},
    Ref(case_id="T-2"),
    {1, 2},
    b"bytes",
    _circular(),
    _deep(199),
    _deep(200),
    _deep(256),
    _deep(600),
]


@pytest.mark.parametrize("value", UNUSUAL, ids=range(len(UNUSUAL)))
def test_unusual_values_give_the_references_text_or_its_error(value):
    assert_same_as_reference(value)


@pytest.mark.parametrize("value", [1.5, {"a": [1.0]}, (1,), {1: 2}, Colour.RED, _circular()])
def test_floats_tuples_and_unusual_types_do_not_take_the_fast_path(value):
    assert _fast_bytes(value) is None


def test_a_float_inside_a_model_takes_the_reference_path():
    assert canonical_json(Ref(case_id="T-1", weight=1e16)) == '{"case_id":"T-1","weight":1e+16}'


#: text with every plane but surrogates (which the reference refuses in bytes, tested above)
texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
integers = (
    st.integers()
    | st.integers(-(2**70), 2**70)
    | st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1])
)
floats = st.floats(allow_nan=True, allow_infinity=True)
plain_scalars = st.none() | st.booleans() | integers | texts
plain_values = st.recursive(
    plain_scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(texts, children, max_size=5),
    max_leaves=30,
)
any_values = st.recursive(
    plain_scalars | floats | st.text(max_size=6),  # st.text may give a lone surrogate
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(texts | st.integers(-3, 3), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(plain_values)
@example({"a": [{"\U00010000": None, "\uffff": True}], "b": 2**64 - 1})
def test_plain_values_are_written_alike(value):
    assert_same_as_reference(value)
    assert digest(value) == "sha256:" + hashlib.sha256(reference_bytes(value)).hexdigest()


@settings(max_examples=400, deadline=None)
@given(any_values)
@example({"x": [1, 2.5, float("nan")]})
@example({"\ud800": 1})
def test_any_value_gives_the_references_text_or_its_error(value):
    assert_same_as_reference(value)


@settings(max_examples=100, deadline=None)
@given(texts, plain_values)
def test_derived_ids_do_not_move(domain, inputs):
    material = domain.encode("utf-8") + b"\x00" + reference_bytes(inputs)
    body = base64.b32encode(hashlib.sha256(material).digest()).decode("ascii").lower()
    assert derive_id("blk", domain, inputs) == f"blk_{body[:26]}"
