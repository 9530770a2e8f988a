import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from turnframe_core import digest
from turnframe_core.commands import (
    ActionClass,
    CommandBatch,
    CommandEnvelope,
    CommandOrigin,
    CommandPolicy,
    ConfirmationPolicy,
    ConfirmedInteraction,
    DirectSafeUserAct,
    ExternalCallback,
    ExternalSaga,
    IdempotencyKeyMismatch,
    InternalPolicy,
    PerCase,
    PerCommand,
    RiskClass,
    ScopeViolation,
    derive_idempotency_key,
    origin_is_trusted,
    origin_satisfies,
)
from turnframe_core.interactions import InteractionKind, ResolutionChannel
from turnframe_test.builders import case, envelope

origins = TypeAdapter(CommandOrigin)
DIRECT = DirectSafeUserAct(evidence_digest=digest("words"))


def _click(
    kind=InteractionKind.CONFIRM_COMMAND,
    action=ActionClass.CONFIRMS_COMMANDS,
    channel=ResolutionChannel.CLICK,
):
    return ConfirmedInteraction(
        interaction_id="int_1",
        payload_hash=digest({}),
        interaction_kind=kind,
        action_class=action,
        channel=channel,
    )


def test_there_is_no_origin_for_a_model_proposal():
    for kind in ("model_proposal", "model_proposed", "model"):
        with pytest.raises(ValidationError):
            origins.validate_python({"kind": kind})
    assert {
        m.model_fields["kind"].default
        for m in (DirectSafeUserAct, ConfirmedInteraction, InternalPolicy, ExternalCallback)
    } == {"direct_safe_user_act", "confirmed_interaction", "internal_policy", "external_callback"}


def test_risk_classes_are_ordered():
    assert sorted(RiskClass, key=lambda r: r.rank) == list(RiskClass)
    assert RiskClass.READ_ONLY < RiskClass.REVERSIBLE_LOW_RISK < RiskClass.SENSITIVE_DATA_CHANGE
    assert RiskClass.DESTRUCTIVE < RiskClass.IRREVERSIBLE < RiskClass.EXTERNAL_REGULATED


def test_the_default_policy_is_conservative():
    policy = CommandPolicy()
    assert policy == CommandPolicy.conservative()
    assert policy.risk is RiskClass.IRREVERSIBLE
    assert policy.confirmation is ConfirmationPolicy.EXPLICIT_CLICK
    assert policy.atomicity == PerCase()


def test_a_direct_user_act_suffices_only_for_low_risk():
    assert origin_satisfies(DIRECT, CommandPolicy.low_risk())
    assert origin_satisfies(DIRECT, CommandPolicy.read_only())
    assert not origin_satisfies(DIRECT, CommandPolicy.conservative())
    assert not origin_satisfies(
        DIRECT,
        CommandPolicy(risk=RiskClass.SENSITIVE_DATA_CHANGE, confirmation=ConfirmationPolicy.NONE),
    )


def test_a_confirming_click_satisfies_an_explicit_click_policy():
    assert origin_satisfies(_click(), CommandPolicy.conservative())
    assert origin_satisfies(
        _click(InteractionKind.REVIEW_CHANGES),
        CommandPolicy(confirmation=ConfirmationPolicy.REVIEW_CARD),
    )


def test_a_text_answer_never_authorizes_above_low_risk():
    text = _click(channel=ResolutionChannel.TEXT)
    assert not origin_is_trusted(text)
    assert not origin_satisfies(text, CommandPolicy.conservative())


def test_a_selection_click_does_not_authorize_the_command_it_disambiguates():
    selection = _click(InteractionKind.SELECT_TARGET, ActionClass.NO_COMMANDS)
    assert not origin_satisfies(selection, CommandPolicy.conservative())


def test_human_professional_review_is_never_the_users_own_click():
    policy = CommandPolicy(confirmation=ConfirmationPolicy.HUMAN_PROFESSIONAL_REVIEW)
    assert not origin_satisfies(_click(), policy)
    assert origin_satisfies(InternalPolicy(policy_key="review.desk"), policy)


def test_an_unverified_callback_is_not_trusted():
    assert not origin_satisfies(
        ExternalCallback(callback_id="cb1", signature_verified=False),
        CommandPolicy(confirmation=ConfirmationPolicy.REAUTHENTICATION),
    )
    assert origin_satisfies(
        ExternalCallback(callback_id="cb1", signature_verified=True),
        CommandPolicy(confirmation=ConfirmationPolicy.REAUTHENTICATION),
    )


def test_each_confirmation_policy_accepts_only_its_own_card():
    reauth = CommandPolicy(confirmation=ConfirmationPolicy.REAUTHENTICATION)
    assert origin_satisfies(_click(InteractionKind.REAUTHENTICATE), reauth)
    assert not origin_satisfies(_click(InteractionKind.CONFIRM_COMMAND), reauth)
    signature = CommandPolicy(confirmation=ConfirmationPolicy.QUALIFIED_SIGNATURE)
    assert origin_satisfies(_click(InteractionKind.EXTERNAL_SIGNATURE), signature)
    assert not origin_satisfies(_click(InteractionKind.REAUTHENTICATE), signature)


def test_the_idempotency_key_is_stable_for_a_replayed_turn_and_new_for_a_new_revision():
    first = envelope()
    assert envelope().idempotency_key == first.idempotency_key
    assert envelope(case_ref=case(revision=2)).idempotency_key != first.idempotency_key
    assert envelope(turn_id="turn_2").idempotency_key != first.idempotency_key
    assert envelope(account_id="acct_2").idempotency_key != first.idempotency_key
    assert envelope(payload={"note": "y"}).idempotency_key != first.idempotency_key


@given(st.dictionaries(st.sampled_from("abcdef"), st.integers(), max_size=5))
def test_the_idempotency_key_ignores_payload_key_order(payload):
    reordered = dict(reversed(list(payload.items())))
    kwargs = dict(
        account_id="acct_1", turn_id="turn_1", case_ref=case(), origin=DIRECT, command_type="x.y"
    )
    assert derive_idempotency_key(payload=payload, **kwargs) == derive_idempotency_key(
        payload=reordered, **kwargs
    )


def test_an_envelope_with_a_chosen_key_is_refused():
    data = envelope().model_dump()
    data["idempotency_key"] = digest("chosen by someone")
    with pytest.raises(IdempotencyKeyMismatch):
        CommandEnvelope.model_validate(data)


def test_a_per_case_batch_targets_a_single_case():
    a = envelope(command_id="cmd_1")
    b = envelope(command_id="cmd_2", case_ref=case(case_id="c2"))
    with pytest.raises(ScopeViolation):
        CommandBatch(batch_id="bat_1", scope=PerCase(), envelopes=(a, b))
    assert CommandBatch(
        batch_id="bat_1", scope=ExternalSaga(saga="s"), envelopes=(a,)
    ).envelopes == (a,)
    with pytest.raises(ScopeViolation):
        CommandBatch(
            batch_id="bat_1", scope=PerCommand(), envelopes=(a, envelope(command_id="cmd_3"))
        )


def test_an_envelope_is_checked_once_and_a_forged_copy_again(monkeypatch):
    """A built envelope placed in a batch does not derive its key again; a copy whose command
    changed, or one built by `model_construct` with a chosen key, is still refused."""
    import turnframe_core.commands as commands

    built = envelope()
    derived = []
    real = commands.derive_idempotency_key
    monkeypatch.setattr(
        commands, "derive_idempotency_key", lambda **kw: derived.append(1) or real(**kw)
    )
    CommandBatch(batch_id="bat_1", scope=PerCase(), envelopes=(built,))
    assert derived == []
    forged = built.model_copy(update={"command_type": "trip.other"})
    with pytest.raises(IdempotencyKeyMismatch):
        CommandBatch(batch_id="bat_1", scope=PerCase(), envelopes=(forged,))
    chosen = CommandEnvelope.model_construct(
        **{**dict(built), "idempotency_key": "sha256:" + "1" * 64}
    )
    with pytest.raises(IdempotencyKeyMismatch):
        CommandBatch(batch_id="bat_1", scope=PerCase(), envelopes=(chosen,))
