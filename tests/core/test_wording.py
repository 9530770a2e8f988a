"""The wording guard reads model prose for claims the turn does not back: per class, per
language, with negations, questions, conditioned promises and ids."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnframe_core import ClaimClass, InteractionBlock, TurnBacking, check_wording, codes
from turnframe_test import confirm_card, receipt_block

NOTHING = TurnBacking()


def _classes(text: str, locale: str = "en", backing: TurnBacking = NOTHING) -> list[str]:
    return [f.claim_class.value if f.claim_class else f.rule for f in
            check_wording(text, locale, backing)]  # fmt: skip


@pytest.mark.parametrize(
    ("locale", "text"),
    [
        ("en", "Done: your outbound flight has been rebooked and the airline confirmed it"),
        ("it", "Fatto: il tuo volo di andata è stato riprenotato e la compagnia l'ha confermato"),
        ("de", "Erledigt: Ihr Hinflug wurde umgebucht und die Airline hat es bestätigt"),
    ],
)
def test_a_success_phrase_with_no_receipt_is_found_in_each_language(locale, text) -> None:
    assert _classes(text, locale) == ["completion", "creation", "acceptance"]


@pytest.mark.parametrize(
    ("text", "claim"),
    [
        ("A new booking was created.", ClaimClass.CREATION),
        ("The date has been updated.", ClaimClass.UPDATE),
        ("I removed the old leg.", ClaimClass.DELETION),
        ("Your request was sent.", ClaimClass.SUBMISSION),
        ("The airline approved it.", ClaimClass.ACCEPTANCE),
        ("The refund was issued.", ClaimClass.DELIVERY),
        ("All set.", ClaimClass.COMPLETION),
        ("Use the button below.", ClaimClass.INTERACTION_VISIBILITY),
        ("I'll let you know when they reply.", ClaimClass.FUTURE_NOTIFICATION),
    ],
)
def test_each_forbidden_class_is_found(text: str, claim: ClaimClass) -> None:
    assert _classes(text) == [claim.value]


@pytest.mark.parametrize(
    ("locale", "text"),
    [
        ("en", "Nothing has been changed yet."),
        ("en", "The request has not been sent."),
        ("en", "Should I send the rebooking to the airline?"),
        ("it", "Non è stato ancora inviato nulla."),
        ("it", "Vuoi che lo invii?"),
        ("de", "Es wurde noch nichts geändert."),
        ("fr", "Rien n'a été modifié pour l'instant."),
        ("es", "No se ha enviado nada todavía."),
        ("es", "¿Quieres que lo envíe?"),
    ],
)
def test_negations_and_questions_claim_nothing(locale: str, text: str) -> None:
    assert _classes(text, locale) == []


def test_a_receipt_backs_outcomes_but_neither_a_card_nor_a_promise() -> None:
    backing = TurnBacking.of([receipt_block()])
    assert _classes("Done: the name is saved.", backing=backing) == []
    assert _classes("Tap the card below.", backing=backing) == ["interaction_visibility"]
    assert _classes("I'll let you know when it lands.", backing=backing) == ["future_notification"]


def test_only_a_follow_up_receipt_backs_a_promise_to_let_the_user_know() -> None:
    receipt = receipt_block()
    backing = TurnBacking.of([receipt], follow_up_codes=[receipt.status_code])
    assert _classes("I'll let you know when the airline answers.", backing=backing) == []


def test_a_receipt_that_reports_a_failure_backs_no_success() -> None:
    failed = receipt_block().model_copy(update={"severity": "error"})
    assert _classes("Done.", backing=TurnBacking.of([failed])) == ["completion"]


def test_a_promise_conditioned_on_the_users_answer_passes_only_beside_the_card() -> None:
    text = "Once you confirm, I will withdraw the trip."
    assert _classes(text) == ["completion"]
    assert _classes(text, backing=TurnBacking(card=True)) == []


def test_an_id_in_prose_must_name_a_block_of_the_turn() -> None:
    receipt = receipt_block()
    backing = TurnBacking.of([receipt])
    assert _classes(f"See {receipt.receipt_id}.", backing=backing) == []
    found = check_wording("Receipt rcp_01J9Z8X7 confirms it.", "en", backing)
    assert [f.code for f in found] == [codes.CLAIM_UNKNOWN_ID]
    found = check_wording("Tap int_… to go on.", "en", TurnBacking(card=True))
    assert [f.code for f in found] == [codes.CLAIM_UNKNOWN_ID]


def test_a_card_in_the_turn_backs_naming_it_and_its_id() -> None:
    card = confirm_card()
    backing = TurnBacking.of([InteractionBlock.from_view("blk_card", card.view())])
    assert _classes(f"Choose below ({card.interaction_id}).", backing=backing) == []


def test_a_language_without_rules_is_not_judged_and_so_refused() -> None:
    found = check_wording("Tudo certo, nada foi alterado.", "pt-BR", NOTHING)
    assert [f.code for f in found] == [codes.CLAIM_UNJUDGED_LANGUAGE]


def test_a_finding_points_at_the_words_it_matched() -> None:
    [finding] = check_wording("Good news. The refund was issued.", "en", NOTHING)
    assert finding.span is not None
    start, end = finding.span
    assert "good news. the refund was issued."[start:end] == "issued"


_SAFE = st.sampled_from(
    [
        "Here is where things stand.",
        "Your trip has two legs.",
        "Let me know if you want another date.",
        "Would you like me to look at the return flight?",
        "Nothing has been changed yet.",
    ]
)
_CLAIMS = st.sampled_from(
    [
        "Your booking has been cancelled",
        "The refund was issued",
        "I've sent it to the airline",
        "All set",
        "I'll let you know when they reply",
        "Tap the button below",
    ]
)


@given(st.lists(_SAFE, max_size=3), _CLAIMS, st.lists(_SAFE, max_size=3), st.sampled_from(
    [".", "!", " - anything else?", "; is that all?", ".Anything else?", "\u2028Ok?"]
))  # fmt: skip
def test_a_claim_is_found_whatever_harmless_prose_surrounds_it(
    before: list[str], claim: str, after: list[str], ending: str
) -> None:
    text = " ".join([*before, claim + ending, *after])
    assert check_wording(text, "en", NOTHING) != []


@pytest.mark.parametrize(
    "text",
    [
        "Your trip was can\u200bcelled.",  # a zero-width space inside the word
        "Your trip was c\u0430ncelled.",  # a Cyrillic a
        "Your trip was &#99;ancelled.",
        "Your trip was ca<b></b>ncelled.",
        "Your trip was can*c*elled.",
        "Sua reserva foi cancelada.",  # another language in an English turn
        "Ihre Buchung wurde storniert.",
        "The flight you didn't want has been cancelled.",  # the negation is not about it
        "Booking no 4411 has been cancelled.",
        "I'm cancelling your booking.",
        "I'll go ahead and cancel it.",
        "Did you know your booking has been cancelled?",
        "See \uff52\uff43\uff50_8F2K.",  # a full-width id
        "See RCP-8F2K.",
    ],
)
def test_spellings_that_hide_a_claim_are_refused(text: str) -> None:
    assert check_wording(text, "en", NOTHING) != []


def test_a_receipt_backs_only_the_classes_its_workflow_declares_for_it() -> None:
    receipt = receipt_block(status_code="test.name_set")
    claims = {"test.name_set": [ClaimClass.UPDATE, ClaimClass.COMPLETION]}
    backing = TurnBacking.of([receipt], receipt_claims=claims)
    assert _classes("The name was changed. Done.", backing=backing) == []
    assert _classes("The refund was issued.", backing=backing) == ["delivery"]
    undeclared = TurnBacking.of([receipt], receipt_claims={})  # not named: every outcome class
    assert _classes("The refund was issued.", backing=undeclared) == []
    nothing = TurnBacking.of([receipt], receipt_claims={"test.name_set": []})
    assert _classes("Done.", backing=nothing) == ["completion"]
