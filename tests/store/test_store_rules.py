"""The argument rules both stores apply (`turnframe_store.roles`), over their whole input space.

The conformance suite checks that every store refuses the same arguments; these properties check
that the rule itself draws its line where protocols rule 6 says."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnframe_store import MAX_LIMIT, MAX_MILLIS, InvalidRecord
from turnframe_store.roles import rules

_ANY_TEXT = st.text(alphabet=st.characters(exclude_categories=()), max_size=20)
#: Any text, often with a NUL or a lone (high or low) surrogate somewhere inside.
_IDS = st.tuples(_ANY_TEXT, st.sampled_from(["", "\x00", "\ud800", "\udfff"]), _ANY_TEXT).map(
    "".join
)


def _storable(value: str) -> bool:
    return "\x00" not in value and not any(0xD800 <= ord(c) <= 0xDFFF for c in value)


@given(_IDS)
def test_an_id_is_refused_exactly_when_it_holds_a_nul_or_a_lone_surrogate(value: str) -> None:
    if _storable(value):
        rules.text(value)
    else:
        with pytest.raises(InvalidRecord):
            rules.text(value)


@given(st.integers(min_value=-(2**70), max_value=2**70))
def test_a_limit_is_accepted_exactly_from_one_to_the_maximum(value: int) -> None:
    if 1 <= value <= MAX_LIMIT:
        assert rules.limit(value) == value
    else:
        with pytest.raises(InvalidRecord):
            rules.limit(value)


@given(st.integers(min_value=-(2**70), max_value=2**70))
def test_a_time_is_accepted_exactly_from_the_epoch_to_the_last_storable_millisecond(
    value: int,
) -> None:
    if 0 <= value <= MAX_MILLIS:
        assert rules.instant(value) == value
    else:
        with pytest.raises(InvalidRecord):
            rules.instant(value)


@pytest.mark.parametrize("value", [True, False, 1.0, "1", None])
def test_a_bool_or_any_other_non_int_is_never_a_limit_time_or_revision(value: object) -> None:
    for rule in (rules.limit, rules.instant, rules.whole):
        with pytest.raises(InvalidRecord):
            rule(value)


def test_the_last_storable_millisecond_is_where_a_datetime_ends() -> None:
    from datetime import UTC, datetime, timedelta

    last = datetime.fromtimestamp(0, UTC) + timedelta(milliseconds=MAX_MILLIS)

    assert last == datetime.max.replace(microsecond=999_000, tzinfo=UTC)
