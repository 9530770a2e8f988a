"""Understandings: what an Interpreter may propose, checked all-or-nothing against the brief."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import JsonValue, ValidationError

from turnframe_core import codes
from turnframe_core.understanding import (
    AmbiguousTarget,
    ArgumentValue,
    Brief,
    CardAnswerProposal,
    CardTarget,
    Constraint,
    ConstraintKind,
    Evidence,
    HandleTarget,
    NewRecord,
    OfferedCard,
    OfferedHandle,
    OfferedOperation,
    Problem,
    ProposedAct,
    Question,
    Target,
    Understanding,
    UnderstandingRejected,
    ValueKind,
    ValueRule,
    _folded,
    _grounded,
    validate_understanding,
)

TEXT = "Rename the first record to Blue Harbor, but do not submit it yet. Yes, keep the card."
CARD = OfferedCard(interaction_id="int_card1", option_ids=("opt_yes", "opt_no"), accepts_text=True)


def _brief(**overrides: Any) -> Brief:
    fields: dict[str, Any] = {
        "text": TEXT,
        "locale": "en",
        "handles": (
            OfferedHandle(handle="h1", label="First record", workflow="sample"),
            OfferedHandle(handle="h2", label="Second record", workflow="sample"),
        ),
        "operations": (
            OfferedOperation(operation="rename", arguments=("name", "note"), required=("name",)),
            OfferedOperation(operation="submit"),
        ),
        "card_on_screen": CARD,
        "new_record_workflows": ("sample",),
    }
    fields.update(overrides)
    return Brief(**fields)


def _act(act_id: str = "a1", **overrides: Any) -> ProposedAct:
    fields: dict[str, Any] = {
        "act_id": act_id,
        "operation": "rename",
        "target": HandleTarget(handle="h1"),
        "arguments": (
            ArgumentValue(name="name", value="Blue Harbor", evidence=Evidence(quote="Blue Harbor")),
        ),
        "evidence": Evidence(quote="Rename the first record"),
    }
    fields.update(overrides)
    return ProposedAct(**fields)


def _rejection(understanding: Understanding, brief: Brief | None = None) -> list[Problem]:
    with pytest.raises(UnderstandingRejected) as raised:
        validate_understanding(understanding, brief or _brief())
    return list(raised.value.problems)


def _problem(code: str, path: str) -> Problem:
    return Problem(code=code, path=path)


# --- accepted -----------------------------------------------------------------------------------


def test_a_well_formed_understanding_is_accepted_unchanged() -> None:
    understanding = Understanding(
        acts=(_act(),),
        questions=(Question(question_id="q1", text="Is it submitted?", about=("h1",)),),
        constraints=(
            Constraint(kind=ConstraintKind.DO_NOT_SUBMIT, evidence=Evidence(quote="do not submit")),
        ),
        card_answers=(
            CardAnswerProposal(
                interaction_id="int_card1", option_id="opt_yes", evidence=Evidence(quote="Yes")
            ),
        ),
    )

    assert validate_understanding(understanding, _brief()) is understanding


def test_an_empty_understanding_is_accepted_even_without_text() -> None:
    understanding = Understanding()

    assert validate_understanding(understanding, _brief(text=None)) is understanding


def test_a_new_record_of_an_offered_workflow_is_accepted() -> None:
    understanding = Understanding(acts=(_act(target=NewRecord(workflow="sample")),))

    assert validate_understanding(understanding, _brief()) is understanding


def test_an_act_on_the_card_on_screen_is_accepted() -> None:
    understanding = Understanding(acts=(_act(target=CardTarget()),))

    assert validate_understanding(understanding, _brief()) is understanding


def test_an_ambiguity_between_offered_handles_is_accepted() -> None:
    understanding = Understanding(acts=(_act(target=AmbiguousTarget(handles=("h1", "h2"))),))

    assert validate_understanding(understanding, _brief()) is understanding


def test_a_correction_of_an_earlier_act_is_accepted() -> None:
    understanding = Understanding(acts=(_act("a1"), _act("a2", corrects="a1")))

    assert validate_understanding(understanding, _brief()) is understanding


def test_a_missing_required_argument_is_left_to_the_reducer() -> None:
    understanding = Understanding(acts=(_act(arguments=()),))

    assert validate_understanding(understanding, _brief()) is understanding


# --- one rule each ------------------------------------------------------------------------------


def test_an_operation_not_on_offer_is_rejected() -> None:
    understanding = Understanding(acts=(_act(operation="erase", arguments=()),))

    assert _rejection(understanding) == [
        _problem(codes.UNDERSTANDING_UNKNOWN_OPERATION, "acts[0].operation")
    ]


def test_a_handle_the_brief_did_not_issue_is_rejected() -> None:
    understanding = Understanding(acts=(_act(target=HandleTarget(handle="h9")),))

    assert _rejection(understanding) == [
        _problem(codes.UNDERSTANDING_UNKNOWN_HANDLE, "acts[0].target.handle")
    ]


def test_an_unissued_handle_in_an_ambiguity_is_rejected() -> None:
    understanding = Understanding(acts=(_act(target=AmbiguousTarget(handles=("h1", "h9"))),))

    assert _rejection(understanding) == [
        _problem(codes.UNDERSTANDING_UNKNOWN_HANDLE, "acts[0].target.handles[1]")
    ]


def test_an_unissued_handle_in_a_question_is_rejected() -> None:
    understanding = Understanding(
        questions=(Question(question_id="q1", text="Which one?", about=("h1", "h9")),)
    )

    assert _rejection(understanding) == [
        _problem(codes.UNDERSTANDING_UNKNOWN_HANDLE, "questions[0].about[1]")
    ]


def test_a_new_record_of_a_workflow_not_on_offer_is_rejected() -> None:
    understanding = Understanding(acts=(_act(target=NewRecord(workflow="other")),))

    assert _rejection(understanding) == [
        _problem(codes.UNDERSTANDING_UNKNOWN_WORKFLOW, "acts[0].target.workflow")
    ]


def test_an_argument_the_operation_does_not_take_is_rejected() -> None:
    extra = ArgumentValue(name="colour", value="blue", evidence=Evidence(quote="Blue"))
    understanding = Understanding(acts=(_act(arguments=(*_act().arguments, extra)),))

    assert _rejection(understanding) == [
        _problem(codes.UNDERSTANDING_UNKNOWN_ARGUMENT, "acts[0].arguments[1]")
    ]


def test_an_argument_given_twice_is_rejected() -> None:
    understanding = Understanding(acts=(_act(arguments=_act().arguments * 2),))

    assert _rejection(understanding) == [
        _problem(codes.UNDERSTANDING_DUPLICATE_ARGUMENT, "acts[0].arguments[1]")
    ]


def test_act_evidence_not_in_the_text_is_rejected() -> None:
    understanding = Understanding(acts=(_act(evidence=Evidence(quote="delete everything")),))

    assert _rejection(understanding) == [
        _problem(codes.UNDERSTANDING_EVIDENCE_NOT_IN_TEXT, "acts[0].evidence")
    ]


def test_argument_evidence_not_in_the_text_is_rejected() -> None:
    argument = ArgumentValue(name="name", value="Red Cove", evidence=Evidence(quote="Red Cove"))
    understanding = Understanding(acts=(_act(arguments=(argument,)),))

    assert _rejection(understanding) == [
        _problem(codes.UNDERSTANDING_EVIDENCE_NOT_IN_TEXT, "acts[0].arguments[0].evidence"),
        _problem(codes.UNDERSTANDING_VALUE_NOT_GROUNDED, "acts[0].arguments[0].value"),
    ]


def test_constraint_evidence_not_in_the_text_is_rejected() -> None:
    constraint = Constraint(kind=ConstraintKind.DO_NOT_DELETE, evidence=Evidence(quote="keep all"))
    understanding = Understanding(constraints=(constraint,))

    assert _rejection(understanding) == [
        _problem(codes.UNDERSTANDING_EVIDENCE_NOT_IN_TEXT, "constraints[0].evidence")
    ]


def test_card_answer_evidence_not_in_the_text_is_rejected() -> None:
    answer = CardAnswerProposal(
        interaction_id="int_card1", option_id="opt_yes", evidence=Evidence(quote="Sure")
    )

    assert _rejection(Understanding(card_answers=(answer,))) == [
        _problem(codes.UNDERSTANDING_EVIDENCE_NOT_IN_TEXT, "card_answers[0].evidence")
    ]


def test_evidence_must_match_verbatim_including_case() -> None:
    understanding = Understanding(acts=(_act(evidence=Evidence(quote="rename the first record")),))

    assert _rejection(understanding) == [
        _problem(codes.UNDERSTANDING_EVIDENCE_NOT_IN_TEXT, "acts[0].evidence")
    ]


def test_a_brief_without_text_accepts_no_act() -> None:
    understanding = Understanding(acts=(_act(arguments=()),))

    assert _rejection(understanding, _brief(text=None)) == [
        _problem(codes.UNDERSTANDING_EVIDENCE_NOT_IN_TEXT, "acts[0].evidence")
    ]


def test_a_brief_without_text_accepts_no_question() -> None:
    understanding = Understanding(questions=(Question(question_id="q1", text="Is it done?"),))

    assert _rejection(understanding, _brief(text=None)) == [
        _problem(codes.UNDERSTANDING_EVIDENCE_NOT_IN_TEXT, "questions[0]")
    ]


def test_a_brief_without_text_accepts_no_constraint() -> None:
    constraint = Constraint(kind=ConstraintKind.NO_EXTERNAL_EFFECTS, evidence=Evidence(quote="x"))

    assert _rejection(Understanding(constraints=(constraint,)), _brief(text=None)) == [
        _problem(codes.UNDERSTANDING_EVIDENCE_NOT_IN_TEXT, "constraints[0].evidence")
    ]


def test_a_card_answer_to_a_card_not_on_screen_is_rejected() -> None:
    answer = CardAnswerProposal(
        interaction_id="int_other", option_id="opt_yes", evidence=Evidence(quote="Yes")
    )

    assert _rejection(Understanding(card_answers=(answer,))) == [
        _problem(codes.UNDERSTANDING_UNKNOWN_INTERACTION, "card_answers[0].interaction_id")
    ]


def test_a_card_answer_when_no_card_is_on_screen_is_rejected() -> None:
    answer = CardAnswerProposal(
        interaction_id="int_card1", option_id="opt_yes", evidence=Evidence(quote="Yes")
    )

    assert _rejection(Understanding(card_answers=(answer,)), _brief(card_on_screen=None)) == [
        _problem(codes.UNDERSTANDING_UNKNOWN_INTERACTION, "card_answers[0].interaction_id")
    ]


def test_a_card_answer_to_a_card_that_takes_no_typed_answers_is_rejected() -> None:
    answer = CardAnswerProposal(
        interaction_id="int_card1", option_id="opt_yes", evidence=Evidence(quote="Yes")
    )
    clicks_only = CARD.model_copy(update={"accepts_text": False})

    assert _rejection(
        Understanding(card_answers=(answer,)), _brief(card_on_screen=clicks_only)
    ) == [_problem(codes.UNDERSTANDING_UNKNOWN_INTERACTION, "card_answers[0].interaction_id")]


def test_a_card_answer_with_an_option_the_card_lacks_is_rejected() -> None:
    answer = CardAnswerProposal(
        interaction_id="int_card1", option_id="opt_maybe", evidence=Evidence(quote="Yes")
    )

    assert _rejection(Understanding(card_answers=(answer,))) == [
        _problem(codes.UNDERSTANDING_UNKNOWN_OPTION, "card_answers[0].option_id")
    ]


def test_two_answers_to_the_same_card_are_rejected() -> None:
    answer = CardAnswerProposal(
        interaction_id="int_card1", option_id="opt_yes", evidence=Evidence(quote="Yes")
    )

    assert _rejection(Understanding(card_answers=(answer, answer))) == [
        _problem(codes.UNDERSTANDING_DUPLICATE_ID, "card_answers[1].interaction_id")
    ]


def test_an_act_on_the_card_when_no_card_is_on_screen_is_rejected() -> None:
    understanding = Understanding(acts=(_act(target=CardTarget()),))

    assert _rejection(understanding, _brief(card_on_screen=None)) == [
        _problem(codes.UNDERSTANDING_UNKNOWN_INTERACTION, "acts[0].target")
    ]


def test_a_repeated_act_id_is_rejected() -> None:
    understanding = Understanding(acts=(_act("a1"), _act("a1")))

    assert _rejection(understanding) == [
        _problem(codes.UNDERSTANDING_DUPLICATE_ID, "acts[1].act_id")
    ]


def test_a_repeated_question_id_is_rejected() -> None:
    question = Question(question_id="q1", text="Is it done?")

    assert _rejection(Understanding(questions=(question, question))) == [
        _problem(codes.UNDERSTANDING_DUPLICATE_ID, "questions[1].question_id")
    ]


def test_a_correction_of_a_later_act_is_rejected() -> None:
    understanding = Understanding(acts=(_act("a1", corrects="a2"), _act("a2")))

    assert _rejection(understanding) == [
        _problem(codes.UNDERSTANDING_DANGLING_REFERENCE, "acts[0].corrects")
    ]


def test_a_cancellation_of_an_act_that_does_not_exist_is_rejected() -> None:
    understanding = Understanding(acts=(_act("a1"), _act("a2", cancels="a7")))

    assert _rejection(understanding) == [
        _problem(codes.UNDERSTANDING_DANGLING_REFERENCE, "acts[1].cancels")
    ]


def test_an_act_cannot_correct_itself() -> None:
    understanding = Understanding(acts=(_act("a1", corrects="a1"),))

    assert _rejection(understanding) == [
        _problem(codes.UNDERSTANDING_DANGLING_REFERENCE, "acts[0].corrects")
    ]


# --- all or nothing -----------------------------------------------------------------------------


def test_one_bad_act_among_good_ones_rejects_all_of_it_and_lists_every_problem() -> None:
    bad = _act(
        "a2",
        operation="rename",
        target=HandleTarget(handle="h9"),
        arguments=(ArgumentValue(name="colour", value="red", evidence=Evidence(quote="crimson")),),
        evidence=Evidence(quote="paint it"),
        cancels="a5",
    )
    understanding = Understanding(
        acts=(_act("a1"), bad, _act("a3", target=HandleTarget(handle="h2")))
    )

    assert _rejection(understanding) == [
        _problem(codes.UNDERSTANDING_UNKNOWN_HANDLE, "acts[1].target.handle"),
        _problem(codes.UNDERSTANDING_UNKNOWN_ARGUMENT, "acts[1].arguments[0]"),
        _problem(codes.UNDERSTANDING_EVIDENCE_NOT_IN_TEXT, "acts[1].arguments[0].evidence"),
        _problem(codes.UNDERSTANDING_EVIDENCE_NOT_IN_TEXT, "acts[1].evidence"),
        _problem(codes.UNDERSTANDING_DANGLING_REFERENCE, "acts[1].cancels"),
    ]


def test_a_rejection_carries_the_rejected_code() -> None:
    with pytest.raises(UnderstandingRejected) as raised:
        validate_understanding(Understanding(acts=(_act(operation="erase"),)), _brief())

    assert raised.value.code == codes.UNDERSTANDING_REJECTED


def test_a_rejection_never_quotes_the_users_text_or_the_models_values() -> None:
    text = "Call it Private Name 42 please"
    argument = ArgumentValue(
        name="secret_field", value="Model Value 99", evidence=Evidence(quote="Private Name 42")
    )
    understanding = Understanding(
        acts=(_act(arguments=(argument,), evidence=Evidence(quote="Invented Quote 7")),)
    )

    with pytest.raises(UnderstandingRejected) as raised:
        validate_understanding(understanding, _brief(text=text))

    shown = " ".join(
        [
            str(raised.value),
            repr(raised.value),
            *(p.model_dump_json() for p in raised.value.problems),
        ]
    )
    for secret in ("Private Name 42", "Model Value 99", "Invented Quote 7", "secret_field"):
        assert secret not in shown


# --- shapes -------------------------------------------------------------------------------------


def test_an_ambiguity_needs_two_distinct_handles() -> None:
    with pytest.raises(ValidationError):
        AmbiguousTarget(handles=("h1", "h1"))


def test_an_ambiguity_needs_at_least_two_handles() -> None:
    with pytest.raises(ValidationError):
        AmbiguousTarget(handles=("h1",))


def test_a_handle_is_an_opaque_token_never_a_record_id() -> None:
    with pytest.raises(ValidationError):
        HandleTarget(handle="case-00042")


def test_an_argument_value_without_a_json_form_is_refused() -> None:
    with pytest.raises(ValidationError):
        ArgumentValue(name="amount", value=float("nan"), evidence=Evidence(quote="x"))


def test_empty_evidence_is_refused() -> None:
    with pytest.raises(ValidationError):
        Evidence(quote="")


def test_a_target_is_read_back_by_its_kind() -> None:
    act = _act(target=NewRecord(workflow="sample"))

    assert ProposedAct.model_validate_json(act.model_dump_json()).target == act.target


def test_the_hash_changes_when_an_argument_value_changes() -> None:
    other = ArgumentValue(name="name", value="Blue Harbour", evidence=Evidence(quote="Blue Harbor"))

    assert (
        Understanding(acts=(_act(),)).hash()
        != Understanding(acts=(_act(arguments=(other,)),)).hash()
    )


# --- property: valid understandings survive JSON ------------------------------------------------

#: Text every store keeps (no NUL, no lone surrogate: an interpreter's values are refused those).
_keepable = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
_json_values: st.SearchStrategy[JsonValue] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(_keepable, max_size=8),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(_keepable, max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def _offered(draw: st.DrawFn) -> tuple[Brief, Understanding]:
    """A brief with text, and an understanding that fits it in every respect."""
    text = draw(st.text(_keepable, min_size=1, max_size=40))

    def evidence() -> Evidence:
        start = draw(st.integers(0, len(text) - 1))
        end = draw(st.integers(start + 1, len(text)))
        return Evidence(quote=text[start:end])

    handles = [f"h{n}" for n in range(draw(st.integers(0, 4)))]
    arguments = ("name", "note", "amount")
    card = draw(st.none() | st.just(CARD))
    brief = Brief(
        text=text,
        locale="en",
        handles=tuple(
            OfferedHandle(handle=h, label=f"Record {h}", workflow="sample") for h in handles
        ),
        operations=(
            OfferedOperation(
                operation="rename",
                arguments=arguments,
                required=("name",),
                rules={"amount": ValueRule(kind=ValueKind.AMOUNT)},
            ),
        ),
        card_on_screen=card,
        new_record_workflows=("sample",),
    )
    # Free-text values are grounded in the text (any string in them is a span of it); the
    # amount is typed, so any number will do.
    spans = st.builds(
        lambda a, b: text[min(a, b) : max(a, b)],
        st.integers(0, len(text)),
        st.integers(0, len(text)),
    ).filter(lambda span: _grounded(span, _folded(text)))  # whole words of the text
    grounded: st.SearchStrategy[JsonValue] = st.recursive(
        st.none() | st.booleans() | spans,
        lambda children: (
            st.lists(children, max_size=3) | st.dictionaries(spans, children, max_size=3)
        ),
        max_leaves=8,
    )
    amounts = st.integers(-(10**14), 10**14) | st.floats(-1e14, 1e14, allow_nan=False)

    targets: list[st.SearchStrategy[Target]] = [st.just(NewRecord(workflow="sample"))]
    if handles:
        targets.append(st.sampled_from(handles).map(lambda h: HandleTarget(handle=h)))
    if len(handles) >= 2:
        targets.append(
            st.lists(st.sampled_from(handles), min_size=2, max_size=3, unique=True).map(
                lambda hs: AmbiguousTarget(handles=tuple(hs))
            )
        )
    if card is not None:
        targets.append(st.just(CardTarget()))

    acts: list[ProposedAct] = []
    for n in range(1, draw(st.integers(0, 3)) + 1):
        earlier = [act.act_id for act in acts]
        names = draw(st.lists(st.sampled_from(arguments), max_size=3, unique=True))
        acts.append(
            ProposedAct(
                act_id=f"a{n}",
                operation="rename",
                target=draw(st.one_of(targets)),
                arguments=tuple(
                    ArgumentValue(
                        name=name,
                        value=draw(amounts if name == "amount" else grounded),
                        evidence=evidence(),
                    )
                    for name in names
                ),
                evidence=evidence(),
                corrects=draw(st.none() | st.sampled_from(earlier)) if earlier else None,
                cancels=draw(st.none() | st.sampled_from(earlier)) if earlier else None,
            )
        )
    questions = tuple(
        Question(
            question_id=f"q{n}",
            text=draw(st.text(_keepable, min_size=1, max_size=20)),
            about=tuple(draw(st.lists(st.sampled_from(handles), unique=True))) if handles else (),
            hypothetical=draw(st.booleans()),
        )
        for n in range(1, draw(st.integers(0, 2)) + 1)
    )
    constraints = tuple(
        Constraint(kind=draw(st.sampled_from(ConstraintKind)), evidence=evidence())
        for _ in range(draw(st.integers(0, 2)))
    )
    card_answers: tuple[CardAnswerProposal, ...] = ()
    if card is not None and draw(st.booleans()):
        card_answers = (
            CardAnswerProposal(
                interaction_id=card.interaction_id,
                option_id=draw(st.sampled_from(card.option_ids)),
                evidence=evidence(),
            ),
        )
    understanding = Understanding(
        acts=tuple(acts), questions=questions, constraints=constraints, card_answers=card_answers
    )
    return brief, understanding


@given(_offered())
def test_a_valid_understanding_round_trips_through_json_with_a_stable_hash(
    offered: tuple[Brief, Understanding],
) -> None:
    brief, understanding = offered
    validate_understanding(understanding, brief)

    restored = Understanding.model_validate_json(understanding.model_dump_json())

    assert restored == understanding
    assert restored.hash() == understanding.hash() == understanding.hash()


def test_an_argument_value_no_store_can_keep_is_refused_where_it_is_built() -> None:
    import pytest
    from pydantic import ValidationError

    from turnframe_core import ArgumentValue, Evidence

    for value in ("Grace\ud800", "a\x00b", {"k\ud800": 1}):
        with pytest.raises(ValidationError, match="argument value"):
            ArgumentValue(name="name", value=value, evidence=Evidence(quote="Grace"))


def test_an_argument_value_is_capped_the_same_alone_and_inside_an_understanding() -> None:
    import pytest
    from pydantic import ValidationError

    from turnframe_core import ArgumentValue, Evidence
    from turnframe_core.limits import MAX_JSON_DEPTH, MAX_MODEL_OUTPUT_CHARS

    deepest: object = "Blue"
    for _ in range(MAX_JSON_DEPTH - 1):
        deepest = [deepest]
    name = ArgumentValue(name="name", value="Blue Harbor", evidence=Evidence(quote="Blue Harbor"))
    note = ArgumentValue(name="note", value=deepest, evidence=Evidence(quote="Blue Harbor"))
    understood = Understanding(acts=(_act(arguments=(name, note)),))
    assert validate_understanding(understood, _brief()) is understood
    with pytest.raises(ValidationError, match="too much text"):
        ArgumentValue(
            name="note",
            value=["x" * 1000] * (MAX_MODEL_OUTPUT_CHARS // 1000 + 1),
            evidence=Evidence(quote="Blue Harbor"),
        )


def test_a_free_text_value_is_grounded_only_by_whole_words_and_its_keys_too() -> None:
    text = "Please rename the trip to Grace Hopper and book it"
    brief = _brief(text=text)

    def problems(value: JsonValue) -> list[str]:
        argument = ArgumentValue(name="name", value=value, evidence=Evidence(quote="Grace"))
        try:
            act = _act(arguments=(argument,), evidence=Evidence(quote="rename the trip"))
            validate_understanding(Understanding(acts=(act,)), brief)
        except UnderstandingRejected as rejected:
            return [p.code for p in rejected.problems]
        return []

    assert problems("Grace Hopper") == []
    assert problems("grace  hopper") == []  # case and spacing folded
    not_grounded = [codes.UNDERSTANDING_VALUE_NOT_GROUNDED]
    assert problems("ace") == not_grounded  # inside "Grace"
    assert problems("ok") == not_grounded  # inside "book"
    assert problems({"Your refund was issued": True}) == not_grounded
    assert problems({"name": "Grace"}) == not_grounded  # "name" is not in the text
