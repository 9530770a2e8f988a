"""The nesting scan that guards the JSON parser: for any JSON value, it says "too deep" exactly
when the value nests arrays and objects deeper than the limit, whatever its strings hold; and it
reads a body far deeper than any recursion limit without recursing."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from turnframe_runtime.http._body import exceeds_depth

_TRICKY = st.text(alphabet='[]{}"\\ ab\n\u00e9\u2028', max_size=12)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TRICKY,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TRICKY, inner, max_size=3),
    max_leaves=30,
)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


@given(_JSON, st.integers(min_value=1, max_value=8), st.booleans())
def test_the_scan_measures_exactly_the_nesting_of_any_json_value(
    value: Any, limit: int, ascii_only: bool
) -> None:
    data = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")

    assert exceeds_depth(data, limit) == (_depth(value) > limit)


def test_a_body_a_million_brackets_deep_is_measured_without_recursion() -> None:
    assert exceeds_depth(b"[" * 1_000_000, 32)
    assert not exceeds_depth(b'["' + b"[" * 1_000_000 + b'"]', 32)
