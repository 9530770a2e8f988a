import pytest

from turnframe_core import codes
from turnframe_core.interactions import (
    AlreadyAnswered,
    ApplyOperation,
    ConfirmCommands,
    ConfirmsAct,
    DeclineCommands,
    Dismiss,
    FreeformNotAllowed,
    FreeformOptional,
    FreeformRequired,
    FreeformRequiredMissing,
    FreeformTooLong,
    IllegalTransition,
    Interaction,
    InteractionExpired,
    InteractionKind,
    InteractionNotActive,
    InteractionNotFound,
    InteractionOption,
    InteractionPayload,
    InteractionResponse,
    InteractionStatus,
    InvalidInteraction,
    OptionStyle,
    ReviewEntry,
    SelectTarget,
    StaleInteraction,
    UnknownOption,
    can_transition,
    validate_answer,
    validate_payload_for,
)
from turnframe_test.builders import card_payload, case, confirm_card

S = InteractionStatus


def _answer(
    card,
    option="opt_confirm",
    revision=1,
    freeform=None,
    account="acct_1",
    conv="conv_1",
    current=1,
    now=2_000,
    interaction_id=None,
):
    response = InteractionResponse(
        interaction_id=interaction_id or card.interaction_id,
        option_id=option,
        expected_case_revision=revision,
        freeform_input=freeform,
    )
    return validate_answer(
        card, response, account_id=account, conversation_id=conv, current_revision=current, now=now
    )


def test_legal_transitions_follow_the_status_machine():
    assert can_transition(S.ACTIVE, S.RESOLVING)
    assert can_transition(S.RESOLVING, S.RESOLVED)
    assert can_transition(S.RESOLVING, S.FAILED)
    assert can_transition(S.RESOLVING, S.ACTIVE)
    for end in (S.DECLINED, S.DISMISSED, S.INVALIDATED, S.EXPIRED):
        assert can_transition(S.ACTIVE, end)
    assert not can_transition(S.ACTIVE, S.RESOLVED)


@pytest.mark.parametrize(
    "terminal", [S.RESOLVED, S.FAILED, S.DECLINED, S.DISMISSED, S.INVALIDATED, S.EXPIRED]
)
def test_a_terminal_card_never_reactivates(terminal):
    assert not any(can_transition(terminal, other) for other in InteractionStatus)


def test_an_illegal_transition_raises():
    with pytest.raises(IllegalTransition):
        confirm_card().transition(S.RESOLVED, at=5)


def test_a_card_is_bound_to_the_revision_at_creation_and_hashes_its_payload():
    card = confirm_card(case_ref=case(revision=4))
    assert card.bound_revision == 4
    assert card.payload_hash == card_payload().hash()
    data = card.model_dump()
    data["payload_hash"] = card_payload(title="Other").hash()
    with pytest.raises(InvalidInteraction):
        Interaction.model_validate(data)


def test_a_boolean_card_has_exactly_two_options():
    payload = InteractionPayload(
        title="Sure?",
        options=(InteractionOption(option_id="opt_yes", label="Yes", action=Dismiss()),),
    )
    assert validate_payload_for(InteractionKind.BOOLEAN, payload)


def test_a_confirm_card_needs_an_authorizing_and_a_declining_option():
    only_decline = InteractionPayload(
        title="x",
        options=(InteractionOption(option_id="opt_no", label="No", action=DeclineCommands()),),
    )
    assert validate_payload_for(InteractionKind.CONFIRM_COMMAND, only_decline)
    assert validate_payload_for(InteractionKind.CONFIRM_COMMAND, card_payload()) == []


def test_a_review_card_needs_diff_entries():
    assert validate_payload_for(InteractionKind.REVIEW_CHANGES, card_payload())
    with_diff = card_payload().model_copy(
        update={"review_entries": (ReviewEntry(field="name", label="Name", after="Ada"),)}
    )
    assert validate_payload_for(InteractionKind.REVIEW_CHANGES, with_diff) == []


def test_a_freeform_card_needs_a_prompt_and_a_required_text_option():
    payload = InteractionPayload(
        title="Which?",
        options=(
            InteractionOption(
                option_id="opt_v",
                label="Send",
                action=ApplyOperation(operation="x.set"),
                freeform=FreeformOptional(),
            ),
        ),
    )
    assert len(validate_payload_for(InteractionKind.FREEFORM, payload)) == 2


def test_option_ids_must_be_unique():
    option = InteractionOption(option_id="opt_a", label="A", action=Dismiss())
    assert validate_payload_for(
        InteractionKind.SINGLE_SELECT, InteractionPayload(title="x", options=(option, option))
    )


def test_a_selection_card_never_authorizes_commands():
    payload = InteractionPayload(
        title="Which one?",
        options=(
            InteractionOption(option_id="opt_a", label="A", action=SelectTarget(case_ref=case())),
            InteractionOption(
                option_id="opt_b", label="B", action=ApplyOperation(operation="x.go")
            ),
        ),
    )
    assert validate_payload_for(InteractionKind.SELECT_TARGET, payload)


def test_a_valid_click_yields_the_stored_action():
    accepted = _answer(confirm_card())
    assert accepted.option_id == "opt_confirm"
    assert accepted.action.kind == "confirm_commands"
    assert accepted.action_class.authorizes_commands


def test_an_unknown_id_and_a_foreign_card_fail_identically():
    card = confirm_card()
    errors = []
    for kwargs in ({"account": "acct_2"}, {"conv": "conv_2"}):
        with pytest.raises(InteractionNotFound) as info:
            _answer(card, **kwargs)
        errors.append(info.value)
    with pytest.raises(InteractionNotFound) as info:
        validate_answer(
            None,
            InteractionResponse(
                interaction_id="int_404", option_id="opt_confirm", expected_case_revision=1
            ),
            account_id="acct_1",
            conversation_id="conv_1",
            current_revision=1,
            now=1,
        )
    errors.append(info.value)
    assert len({(type(e), str(e), repr(e), e.code) for e in errors}) == 1


def test_checks_run_ownership_before_option_before_revision_before_freeform():
    card = confirm_card(case_ref=case(revision=1))
    with pytest.raises(InteractionNotFound):
        _answer(card, option="opt_nope", revision=9, freeform="x", account="acct_2")
    with pytest.raises(UnknownOption):
        _answer(card, option="opt_nope", revision=9, freeform="x")
    with pytest.raises(StaleInteraction):
        _answer(card, revision=9, freeform="x")
    with pytest.raises(FreeformNotAllowed):
        _answer(card, freeform="x")


def test_a_stale_revision_is_refused_both_ways():
    card = confirm_card(case_ref=case(revision=3))
    with pytest.raises(StaleInteraction):
        _answer(card, revision=2, current=3)
    with pytest.raises(StaleInteraction) as info:
        _answer(card, revision=3, current=4)
    assert (info.value.bound_revision, info.value.current_revision) == (3, 4)


def test_a_revision_independent_card_survives_a_revision_change():
    card = confirm_card(case_ref=case(revision=3), revision_independent=True)
    assert _answer(card, revision=3, current=7).option_id == "opt_confirm"


def test_a_second_answer_is_already_answered():
    card = confirm_card().transition(S.RESOLVING, at=5, option_id="opt_confirm")
    with pytest.raises(AlreadyAnswered) as info:
        _answer(card)
    assert info.value.code == codes.INTERACTION_ALREADY_ANSWERED
    resolved = card.transition(S.RESOLVED, at=6, event_ids=("evt_1",))
    with pytest.raises(AlreadyAnswered) as info:
        _answer(resolved, option="opt_decline")
    assert info.value.interaction.resolved_option_id == "opt_confirm"


def test_a_closed_or_expired_card_is_not_answerable():
    with pytest.raises(InteractionNotActive):
        _answer(confirm_card().transition(S.INVALIDATED, at=5))
    with pytest.raises(InteractionExpired):
        _answer(confirm_card(expires_at=1_500), now=1_500)


def test_freeform_rules_are_enforced():
    payload = InteractionPayload(
        title="New name?",
        freeform_prompt="Type it",
        options=(
            InteractionOption(
                option_id="opt_set",
                label="Set",
                action=ApplyOperation(operation="x.set_name"),
                freeform=FreeformRequired(max_len=5),
            ),
        ),
    )
    card = Interaction.create(
        interaction_id="int_2",
        account_id="acct_1",
        conversation_id="conv_1",
        case_ref=case(),
        kind=InteractionKind.FREEFORM,
        payload=payload,
        created_by_turn="turn_1",
        created_at=1,
    )
    with pytest.raises(FreeformRequiredMissing):
        _answer(card, option="opt_set", freeform="   ")
    with pytest.raises(FreeformTooLong):
        _answer(card, option="opt_set", freeform="toolong")
    assert _answer(card, option="opt_set", freeform="Ada").freeform_input == "Ada"


def test_a_card_that_authorizes_commands_is_never_resolved_from_text():
    from turnframe_core.interactions import TextResolution

    with pytest.raises(InvalidInteraction):
        confirm_card(text_resolution=TextResolution.LOW_RISK_TEXT)


def test_a_payload_without_a_purpose_keeps_the_hash_it_had_before_purposes_existed():
    """Cards stored before `purpose` existed must keep validating against their stored hash."""
    payload = InteractionPayload(
        title="Please confirm: Rebook",
        options=(
            InteractionOption(
                option_id="opt_confirm",
                label="Confirm",
                style=OptionStyle.PRIMARY,
                action=ConfirmCommands(command_ids=("cmd_abc",)),
            ),
            InteractionOption(option_id="opt_decline", label="Cancel", action=DeclineCommands()),
        ),
        metadata={"leg": "outbound"},
    )
    golden = "sha256:1bc5cd873b86a003131a33a94cefd386a38f4b17acae7a0110fc93a95365d47f"
    assert payload.hash() == golden
    with_purpose = payload.model_copy(update={"purpose": ConfirmsAct(act_id="a1")})
    assert with_purpose.hash() != golden
