"""The act builders are library API: an interpreter writes a proposal with them, and what they
build passes the same all-or-nothing check as any proposal."""

from __future__ import annotations

import pytest

import turnframe_test.understandings as kit
from turnframe_core import (
    AmbiguousTarget,
    Brief,
    CardTarget,
    ConstraintKind,
    UnderstandingRejected,
    act,
    ambiguous_act,
    constraint,
    question,
    understanding_of,
    validate_understanding,
)
from turnframe_core.understanding import OfferedHandle, OfferedOperation

BRIEF = Brief(
    text="Name Grace Hopper, but do not submit",
    locale="en",
    handles=(
        OfferedHandle(handle="h1", label="Rome trip", workflow="trip"),
        OfferedHandle(handle="h2", label="Oslo trip", workflow="trip"),
    ),
    operations=(OfferedOperation(operation="trip.set_name", arguments=("name",)),),
)


def test_built_parts_make_an_understanding_that_fits_its_brief() -> None:
    proposal = understanding_of(
        act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper"),
        constraint("do_not_submit", "do not submit"),
        question("q1", "Is it saved?", "h1"),
    )
    assert validate_understanding(proposal, BRIEF) is proposal
    assert proposal.constraints[0].kind is ConstraintKind.DO_NOT_SUBMIT
    assert proposal.questions[0].about == ("h1",)


def test_an_act_without_a_handle_targets_the_card_on_screen() -> None:
    assert isinstance(act("a1", "x.y", None, "yes").target, CardTarget)


def test_an_ambiguous_act_names_every_candidate() -> None:
    built = ambiguous_act("a1", "trip.set_name", ("h1", "h2"), "Grace Hopper", name="Grace Hopper")
    assert built.target == AmbiguousTarget(handles=("h1", "h2"))


def test_a_built_value_the_user_never_wrote_is_refused() -> None:
    with pytest.raises(UnderstandingRejected):
        validate_understanding(
            understanding_of(act("a1", "trip.set_name", "h1", "Grace Hopper", name="Ada")), BRIEF
        )


def test_the_test_kit_re_exports_the_library_builders() -> None:
    assert (kit.act, kit.question, kit.constraint, kit.ambiguous_act) == (
        act,
        question,
        constraint,
        ambiguous_act,
    )
    assert kit.understanding is understanding_of
