"""The wording guard reads model prose for claims the turn does not back: per class, per
language, with negations, questions, conditioned promises and ids."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnframe_core import (
    ClaimClass,
    InteractionBlock,
    StateValue,
    TurnBacking,
    check_wording,
    codes,
)
from turnframe_core.wording import GuardConfig, ungrounded_values, value_grounds
from turnframe_test import case, confirm_card, receipt_block

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


# --- the defects a realistic corpus showed ------------------------------------------------------


@pytest.mark.parametrize(
    ("locale", "text"),
    [
        ("en", "Your flights haven't been changed."),
        ("en", "Nothing\u2019s been cancelled, and the booking isn't touched."),
        ("en", "It's not been sent anywhere yet."),
        ("en", "I won't cancel anything, and I can't rebook it from here."),
        ("en", "Nothing's changed on your return flight."),
        ("it", "Non l'ho annullato e non è stato modificato nulla."),
        ("de", "Ihre Flüge wurden nicht geändert und nichts wurde storniert."),
        ("fr", "Rien n'a été annulé et vos vols n'ont pas été modifiés."),
        ("es", "No se ha cancelado nada y tus vuelos no han sido modificados."),
    ],
)
def test_an_honest_negation_with_a_contraction_passes(locale: str, text: str) -> None:
    assert _classes(text, locale) == []


@pytest.mark.parametrize(
    ("locale", "text"),
    [
        ("en", "After that it can't be changed any more."),
        ("it", "Dopo non potrà più essere modificato."),
        ("de", "Gut, ich storniere sie nicht."),
        ("de", "Den Namen konnte ich nicht ändern."),
        ("fr", "Ensuite, il ne pourra plus être modifié."),
        ("es", "Después ya no podrá ser modificado."),
    ],
)
def test_a_negation_reaches_through_modals_and_follows_a_verb_second_promise(
    locale: str, text: str
) -> None:
    assert _classes(text, locale) == []


@pytest.mark.parametrize(
    ("locale", "text"),
    [
        ("en", "Your outbound flight stays as booked."),
        ("it", "Il volo di andata resta come prenotato."),
        ("de", "Ihr Hinflug bleibt wie gebucht."),
        ("fr", "Votre vol aller reste tel que réservé."),
        ("es", "Tu vuelo de ida sigue tal como estaba previsto."),
    ],
)
def test_as_booked_reads_as_how_things_stand(locale: str, text: str) -> None:
    assert _classes(text, locale) == []


@pytest.mark.parametrize(
    ("locale", "text"),
    [
        ("en", "Nothing was cancelled, and your flight has been rebooked."),
        ("en", "I didn't charge you, but the booking was cancelled."),
        ("it", "Non ti è stato addebitato nulla, ma la prenotazione è stata annullata."),
        ("de", "Es wurde nichts berechnet, aber die Buchung wurde storniert."),
        ("fr", "Rien n'a été facturé, mais la réservation a été annulée."),
        ("es", "No se ha cobrado nada, pero la reserva ha sido cancelada."),
    ],
)
def test_a_negation_covers_its_own_clause_not_the_next(locale: str, text: str) -> None:
    assert "deletion" in _classes(text, locale) or "creation" in _classes(text, locale)


@pytest.mark.parametrize(
    ("locale", "text"),
    [
        ("en", "Is there anything else now that your flight has been rebooked?"),
        ("en", "Can I help with anything else, since your booking was cancelled?"),
        ("en", "Would you like the receipt for the rebooked flight?"),
        ("it", "Posso fare altro ora che il volo è stato riprenotato?"),
        ("de", "Kann ich sonst noch helfen, jetzt wo Ihr Flug umgebucht wurde?"),
        ("fr", "Puis-je faire autre chose maintenant que votre vol a été modifié ?"),
        ("es", "¿Puedo ayudarte en algo más ahora que tu vuelo ha sido cambiado?"),
    ],
)
def test_a_question_that_asserts_an_outcome_on_the_way_is_found(locale: str, text: str) -> None:
    assert _classes(text, locale) != []


@pytest.mark.parametrize(
    ("locale", "text"),
    [
        ("en", "Would you like me to rebook it?"),
        ("en", "Should it be cancelled and rebooked on a later flight?"),
        ("en", "Do you want me to check whether it has been cancelled?"),
        ("it", "Vuoi che venga annullato e riprenotato?"),
        ("de", "Soll die Buchung storniert und neu gebucht werden?"),
        ("fr", "Voulez-vous que la réservation soit annulée ?"),
        ("es", "¿Quieres que la reserva sea cancelada?"),
    ],
)
def test_a_question_that_only_asks_passes(locale: str, text: str) -> None:
    assert _classes(text, locale) == []


@pytest.mark.parametrize(
    ("locale", "text", "found"),
    [
        ("en", "Your booking was cancelled and rebooked.", ["deletion", "creation"]),
        ("en", "Your booking hasn't been cancelled or rebooked.", []),
        ("it", "La prenotazione è stata annullata e riprenotata.", ["deletion", "creation"]),
        ("it", "La prenotazione non è stata annullata né modificata.", []),
        ("de", "Ihre Buchung wurde storniert und umgebucht.", ["deletion", "creation"]),
        ("de", "Ihre Buchung wurde nicht storniert und nicht umgebucht.", []),
        ("fr", "Votre réservation a été annulée et remboursée.", ["deletion", "delivery"]),
        ("fr", "Votre réservation n'a pas été annulée ni modifiée.", []),
        ("es", "Tu reserva fue cancelada y reembolsada.", ["deletion", "delivery"]),
        ("es", "Tu reserva no fue cancelada ni modificada.", []),
    ],
)
def test_a_clause_joined_by_and_keeps_its_subject_and_negation(
    locale: str, text: str, found: list[str]
) -> None:
    assert _classes(text, locale) == found


@pytest.mark.parametrize(
    ("locale", "state", "event"),
    [
        ("en", "Your trip is booked for Monday.", "I've booked your trip for Monday."),
        ("en", "Your booked flight leaves in the morning.", "You've been booked on it."),
        ("en", "The flight you booked is still there.", "We booked the flight."),
        ("it", "Il tuo viaggio è prenotato per lunedì.", "Ho prenotato il viaggio per lunedì."),
        ("it", "Il volo prenotato parte la mattina.", "Il volo è stato prenotato."),
        ("de", "Ihre Reise ist für Montag gebucht.", "Ich habe Ihre Reise gebucht."),
        ("de", "Der gebuchte Flug startet morgens.", "Der Flug wurde gebucht."),
        ("fr", "Votre voyage est réservé pour lundi.", "J'ai réservé votre voyage."),
        ("fr", "Le vol réservé part le matin.", "Le vol a été réservé."),
        ("es", "Tu viaje está reservado para el lunes.", "He reservado tu viaje."),
        ("es", "El vuelo reservado sale por la mañana.", "El vuelo ha sido reservado."),
    ],
)
def test_a_participle_of_state_is_not_an_event(locale: str, state: str, event: str) -> None:
    assert _classes(state, locale) == []
    assert _classes(event, locale) == ["creation"]


def test_a_state_marked_as_new_is_an_event() -> None:
    assert "creation" in _classes("Your trip is now booked for Monday.")


@pytest.mark.parametrize(
    ("locale", "text"),
    [
        ("en", "You're on the 14:10 departure now."),
        ("en", "Good news: the trip is off."),
        ("en", "Your new booking reference is K7XQ2M."),
        ("en", "The departure is now later in the day."),
        ("en", "That booking is no longer valid."),
        ("en", "You're good to go."),
        ("it", "Il tuo nuovo volo parte più tardi."),
        ("it", "Il viaggio è saltato."),
        ("de", "Ihr neuer Flug startet später."),
        ("de", "Die Reise fällt leider aus."),
        ("fr", "Votre nouveau vol part plus tard."),
        ("fr", "Le voyage n'aura pas lieu."),
        ("es", "Tu nuevo vuelo sale más tarde."),
        ("es", "Ya no existe esa reserva."),
    ],
)
def test_an_outcome_stated_through_content_is_found(locale: str, text: str) -> None:
    assert _classes(text, locale) != []


@pytest.mark.parametrize(
    ("locale", "text"),
    [
        ("en", "Please confirm below."),
        ("en", "Thanks, understood."),
        ("en", "Sure, happy to help."),
        ("it", "Conferma, per favore."),
        ("de", "Bitte bestätigen Sie."),
        ("fr", "Merci, bien reçu."),
        ("es", "Gracias, entendido."),
    ],
)
def test_a_short_sentence_of_ordinary_words_is_in_the_turns_language(
    locale: str, text: str
) -> None:
    assert "language.mismatch" not in _classes(text, locale)


def test_the_language_check_is_configurable_per_language() -> None:
    text = "Ciao Ada, tutto chiaro?"
    assert "language.mismatch" in _classes(text, "en")
    relaxed = GuardConfig(unchecked_languages=frozenset({"en"}))
    assert check_wording(text, "en", NOTHING, relaxed) == []
    widened = GuardConfig(ordinary_words={"en": frozenset({"ciao"})})
    assert check_wording(text, "en", NOTHING, widened) == []


def test_any_id_written_the_way_the_librarys_are_must_name_a_block() -> None:
    found = check_wording("Your booking bkg_01J9Z8 is safe.", "en", NOTHING)
    assert [f.code for f in found] == [codes.CLAIM_UNKNOWN_ID]


# --- backing by fact ------------------------------------------------------------------------------


def test_a_follow_up_pending_from_an_earlier_turn_backs_hearing_back_in_this_chat() -> None:
    text = "You'll hear back in this chat once the airline answers."
    assert _classes(text) == ["future_notification"]
    assert _classes(text, backing=TurnBacking.of([], pending_follow_up=True)) == []


def test_a_pending_follow_up_backs_no_outcome() -> None:
    backing = TurnBacking.of([], pending_follow_up=True)
    assert _classes("Your flight has been rebooked.", backing=backing) == ["creation"]


def test_a_receipt_grounds_what_it_says_not_what_its_class_might() -> None:
    sent = receipt_block(status_code="trip.rebooking_sent").model_copy(
        update={"title": "Rebooking request sent to Lufthansa"}
    )
    grounds = value_grounds([sent])
    backing = TurnBacking.of([sent])
    honest = "I've sent your rebooking request to Lufthansa."
    assert check_wording(honest, "en", backing) == []
    assert ungrounded_values(honest, "en", grounds) == []
    invented = "I've sent it to Lufthansa; you now leave at 14:10."
    assert [f.rule for f in ungrounded_values(invented, "en", grounds)] == ["value.time"]


def test_a_failed_receipt_grounds_nothing_and_a_card_grounds_its_words() -> None:
    failed = receipt_block().model_copy(update={"severity": "error", "title": "Refund 40 EUR"})
    card = InteractionBlock.from_view("blk_card", confirm_card().view())
    grounds = value_grounds([failed, card], words=["my order A-77"])
    assert ungrounded_values("Refund 40 EUR for A-77?", "en", grounds) != []
    assert ungrounded_values("About order A-77.", "en", grounds) == []


def test_an_allowed_fact_grounds_every_value_it_holds() -> None:
    fact = StateValue(case_ref=case(workflow="trip"), field="travel_date", value="2027-04-02")
    grounds = value_grounds(facts=[fact])
    assert ungrounded_values("You travel on Friday, April 2.", "en", grounds) == []
    assert ungrounded_values("You travel on April 3.", "en", grounds) != []
