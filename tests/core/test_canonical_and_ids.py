import json
import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from turnframe_core.canonical import CanonicalJsonError, canonical_json, digest
from turnframe_core.derive import (
    derive_block_id,
    derive_command_id,
    derive_interaction_id,
    derive_outbox_id,
    derive_receipt_id,
    derive_replay_token,
)
from turnframe_core.ids import (
    PREFIXES,
    AccountId,
    InvalidId,
    SequentialIdSource,
    TurnId,
    UlidIdSource,
    derive_id,
    is_account_id,
    is_derived_id,
    require_prefixed,
)
from turnframe_core.server_events import OriginName, is_origin_name
from turnframe_runtime import TrustedOrigin

json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=12)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


def test_canonical_json_sorts_keys_and_drops_whitespace():
    assert canonical_json({"b": 1, "a": [True, None, "é"]}) == '{"a":[true,null,"é"],"b":1}'


def test_integers_stay_integers():
    assert canonical_json({"n": 10**20}) == '{"n":100000000000000000000}'


def test_nan_has_no_canonical_form_and_the_error_does_not_echo_the_value():
    with pytest.raises(CanonicalJsonError) as info:
        canonical_json({"secret-value": float("nan")})
    assert "secret" not in str(info.value)


def test_a_digest_is_sha256_hex():
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest({"a": 1}))


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=6))
def test_a_digest_is_stable_under_key_order(value):
    reordered = dict(reversed(list(value.items())))
    assert digest(value) == digest(reordered)
    assert json.loads(canonical_json(value)) == value


def _paths(value, prefix=()):
    """Every path to a leaf of a nested JSON value."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))
    else:
        yield prefix


def _replace(value, path, new):
    if not path:
        return new
    head, *rest = path
    copy = list(value) if isinstance(value, list) else dict(value)
    copy[head] = _replace(value[head], rest, new)
    return copy


@given(st.dictionaries(st.text(max_size=8), json_values, min_size=1, max_size=6), st.data())
def test_a_digest_changes_when_any_value_changes(value, data):
    path = data.draw(st.sampled_from(list(_paths(value))))
    leaf = value
    for step in path:
        leaf = leaf[step]
    other = data.draw(json_values.filter(lambda v: v != leaf or type(v) is not type(leaf)))
    changed = _replace(value, path, other)
    assert digest(changed) != digest(value)


def test_ulids_are_prefixed_lowercase_and_sort_by_creation():
    clock = iter([1_700_000_000_000, 1_700_000_000_000, 1_700_000_000_001])
    source = UlidIdSource(clock_ms=lambda: next(clock))
    ids = [source.new_id("turn") for _ in range(3)]
    assert all(re.fullmatch(r"turn_[0-9a-z]{26}", i) for i in ids)
    assert ids == sorted(ids)
    assert len(set(ids)) == 3


def test_the_sequential_source_is_deterministic():
    assert (
        SequentialIdSource().new_id("evt") == SequentialIdSource().new_id("evt") == "evt_0000000001"
    )


def test_derived_ids_are_deterministic_and_sensitive_to_every_input():
    assert derive_command_id("acct_1", "turn_1", "a1", 0) == derive_command_id(
        "acct_1", "turn_1", "a1", 0
    )
    assert derive_command_id("acct_1", "turn_1", "a1", 0) != derive_command_id(
        "acct_1", "turn_1", "a1", 1
    )
    assert derive_command_id("acct_1", "turn_1", "a1", 0) != derive_command_id(
        "acct_1", "turn_2", "a1", 0
    )
    assert derive_id("blk", "d1", {"x": 1}) != derive_id("blk", "d2", {"x": 1})


def test_each_derived_id_carries_its_prefix():
    assert derive_block_id("acct_1", "turn_1", "transition").startswith("blk_")
    assert derive_receipt_id("s", ["evt_1"]).startswith("rcp_")
    assert derive_interaction_id("acct_1", "turn_1", "confirm:a1").startswith("int_")
    assert derive_outbox_id("acct_1", "cmd_1").startswith("obx_")
    assert derive_replay_token("turn_1").startswith("rpl_")


@given(st.sampled_from(PREFIXES), st.text(max_size=12), json_values)
def test_every_derived_id_has_the_derived_form(prefix, domain, inputs):
    assert is_derived_id(derive_id(prefix, domain, inputs))  # type: ignore[arg-type]


@given(st.integers(0, 2**46 - 1), st.binary(min_size=10, max_size=10), st.integers(1, 3))
def test_no_ulid_has_the_derived_form_before_the_year_4199(now, random, count):
    source = UlidIdSource(clock_ms=lambda: now, random_bytes=lambda n: random)
    for _ in range(count):  # the second in one millisecond increments the random part
        assert not is_derived_id(source.new_id("turn"))


def test_sequential_ids_and_other_shapes_do_not_have_the_derived_form():
    source = SequentialIdSource(start=2_222_222_222)
    assert not is_derived_id(source.new_id("turn"))
    assert not is_derived_id("turn_" + "a" * 25)  # one short
    assert not is_derived_id("turn_" + "a" * 27)
    assert not is_derived_id("turn_" + "a" * 25 + "1")  # not in the alphabet
    assert not is_derived_id("turn_" + "A" * 26)
    assert not is_derived_id("nope_" + "a" * 26)  # not a prefix
    assert is_derived_id("turn_" + "a" * 26)


def test_a_receipt_id_ignores_event_order_and_repeats():
    assert derive_receipt_id("s", ["evt_2", "evt_1"]) == derive_receipt_id(
        "s", ["evt_1", "evt_2", "evt_1"]
    )


def test_a_malformed_id_is_refused():
    with pytest.raises(InvalidId):
        require_prefixed("turn", "conv_1")
    assert require_prefixed("turn", "turn_1") == "turn_1"


def test_every_derived_id_that_keys_a_record_changes_with_the_account() -> None:
    from turnframe_core.derive import (
        derive_batch_id,
        derive_block_id,
        derive_command_id,
        derive_interaction_id,
        derive_outbox_id,
    )

    derivations = {
        "block": lambda a: derive_block_id(a, "turn_1", "transition"),
        "command": lambda a: derive_command_id(a, "turn_1", "a1", 0),
        "batch": lambda a: derive_batch_id(a, "turn_1", "trip", "T-1", "per_case"),
        "interaction": lambda a: derive_interaction_id(a, "turn_1", "confirm:a1"),
        "outbox": lambda a: derive_outbox_id(a, "cmd_1"),
    }
    for name, derive in derivations.items():
        assert derive("acct_a") != derive("acct_b"), name
        assert derive("acct_a") == derive("acct_a"), name


def _valid(kind: object, value: str) -> bool:
    try:
        TypeAdapter(kind).validate_python(value)
    except ValidationError:
        return False
    return True


#: strings near the id rules' edges: their characters, others, line breaks, lengths past them
_near_ids = st.text(alphabet="aZ09_-.:@\n é", max_size=210)


@given(_near_ids)
@example("acct_1\n")
@example("a" * 200)
@example("a" * 201)
def test_an_account_id_is_judged_by_one_rule(value):
    assert is_account_id(value) == _valid(AccountId, value)


@given(_near_ids.map(lambda body: "turn_" + body))
@example("turn_1\n")
def test_a_path_id_is_judged_by_the_models_rule(value):
    try:
        require_prefixed("turn", value)
    except InvalidId:
        accepted = False
    else:
        accepted = True
    assert accepted == _valid(TurnId, value)


@given(st.text(alphabet="az09_.-A \n", max_size=70))
@example("bank\n")
def test_an_origin_is_named_by_the_rule_an_events_origin_is_judged_by(name):
    try:
        TrustedOrigin(name)
    except ValueError:
        named = False
    else:
        named = True
    assert named == is_origin_name(name) == _valid(OriginName, name)


@pytest.mark.parametrize("n", range(200))
def test_a_derived_id_is_the_first_130_bits_of_its_hash_in_base32(n):
    """The table that writes the last two characters gives what encoding 17 bytes gives."""
    import base64
    import hashlib

    from turnframe_core.canonical import canonical_bytes

    inputs = {"n": n, "text": "é" * (n % 7)}
    material = b"turnframe.test\x00" + canonical_bytes(inputs)
    reference = base64.b32encode(hashlib.sha256(material).digest()[:17]).decode().lower()[:26]
    assert derive_id("blk", "turnframe.test", inputs) == f"blk_{reference}"


def test_a_case_references_key_is_built_once_and_equals_a_validated_key():
    from turnframe_core.cases import CaseKey, CaseRef

    ref = CaseRef(workflow="trip", case_id="T-1", expected_revision=2)
    validated = CaseKey(workflow="trip", case_id="T-1")
    assert ref.key is ref.key
    assert ref.key == validated and hash(ref.key) == hash(validated)
    assert ref.key.model_dump_json() == validated.model_dump_json()
    assert ref.at(3).key == validated
    # the key of an invalid case is never built: the reference itself is refused
    with pytest.raises(ValidationError):
        CaseRef(workflow="Trip!", case_id="T-1", expected_revision=2)
