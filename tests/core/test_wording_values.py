"""Value grounding: every value free prose names (a number, date, time, amount, code, email,
name) must be one the turn holds, compared after normalisation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnframe_core import codes
from turnframe_core.wording import GuardConfig, ungrounded_values

#: what a travel turn may state: a fact's value, a receipt's title, a card's label, the user's words
GROUNDS = (
    "Outbound LH-1234 departs 2025-03-14T09:10",
    "Rebooking request sent to Lufthansa",
    "Refund: 120.00 EUR",
    "Booking reference K7XQ2M",
    "ada@example.com",
    "Can you move my flight to Rome on Friday?",
)


def _flagged(text: str, locale: str = "en", grounds: tuple[str, ...] = GROUNDS) -> list[str]:
    """The flagged tokens, read back through each finding's span."""
    return [text[f.span[0] : f.span[1]] for f in ungrounded_values(text, locale, grounds) if f.span]


@pytest.mark.parametrize(
    ("locale", "text"),
    [
        ("en", "Your outbound LH1234 leaves at 9:10 am on Friday, March 14."),
        ("en", "The refund of €120 goes back to ada@example.com; reference K7XQ2M."),
        ("en", "I passed your request on to Lufthansa for the flight to Rome."),
        ("it", "Il volo LH 1234 parte venerdì 14 marzo alle 9:10, rimborso di 120 €."),
        ("de", "Ihr Flug LH-1234 nach Rome startet am Freitag, 14. März, um 9.10 Uhr."),
        ("fr", "Votre vol part le vendredi 14 mars à 9h10 ; remboursement de 120,00 EUR."),
        ("es", "Tu vuelo sale el viernes 14 de marzo de 2025 a las 09:10, referencia k7xq2m."),
    ],
)
def test_values_the_turn_holds_pass_however_they_are_written(locale: str, text: str) -> None:
    assert _flagged(text, locale) == []


@pytest.mark.parametrize(
    ("locale", "text", "value"),
    [
        ("en", "You're on the 14:10 departure now.", "14:10"),
        ("en", "Your new booking reference is Q4ZP7T.", "Q4ZP7T"),
        ("en", "You're on BA 2231 instead.", "BA 2231"),
        ("en", "A refund of €150 is on its way.", "€150"),
        ("en", "A confirmation went to bob@example.com.", "bob@example.com"),
        ("en", "I also asked Ryanair about it.", "Ryanair"),
        ("en", "Your seat is 14C.", "14C"),
        ("en", "You fly out on Saturday instead.", "Saturday"),
        ("en", "It now leaves on March 15th.", "March 15th"),
        ("en", "The new time is 2 pm.", "2 pm"),
        ("it", "Ora parti alle 16:45 da Milano.", "16:45"),
        ("de", "Sie fliegen jetzt am 15. März.", "15. März"),
        ("fr", "Votre nouvelle référence est AB-9931.", "AB-9931"),
        ("es", "Tu vuelo sale ahora a las 18h.", "18h"),
        ("es", "El reembolso es de 95 euros.", "95 euros"),
    ],
)
def test_a_value_the_turn_does_not_hold_is_found(locale: str, text: str, value: str) -> None:
    assert any(token.rstrip(".") == value for token in _flagged(text, locale))


def test_a_finding_names_the_kind_of_value_and_where_it_lies_but_never_the_value() -> None:
    [finding] = ungrounded_values("Your new reference is Q4ZP7T.", "en", GROUNDS)
    assert finding.code == codes.CLAIM_UNGROUNDED_VALUE
    assert finding.rule == "value.code"
    assert "q4zp7t" not in (finding.excerpt + finding.rule).lower()
    assert finding.span == (22, 28)


@pytest.mark.parametrize(
    ("locale", "text"),
    [
        ("en", "Please confirm below. I can check Rome for you."),
        ("en", "Would you like me to look at the return as well? I'm here to help."),
        ("en", "Thanks! Here is where things stand: nothing has changed yet."),
        ("de", "Ihre Buchung bleibt wie sie ist. Möchten Sie eine andere Verbindung?"),
        ("it", "Va bene. Vuoi che controlli un'altra data per Rome?"),
        ("fr", "D'accord. Souhaitez-vous que je regarde une autre date ?"),
        ("es", "Vale. ¿Quieres que mire otra fecha para tu viaje?"),
    ],
)
def test_ordinary_prose_names_no_value(locale: str, text: str) -> None:
    assert _flagged(text, locale) == []


def test_a_weekday_month_or_day_is_grounded_by_a_full_date_in_the_grounds() -> None:
    assert _flagged("That is Friday the 14th, in March.", "en", ("2025-03-14",)) == []
    assert _flagged("That is Saturday.", "en", ("2025-03-14",)) == ["Saturday"]


def test_german_nouns_are_not_names_but_a_place_after_a_preposition_is() -> None:
    text = "Ihre Umbuchung nach Paris ist noch offen."
    assert _flagged(text, "de") == ["Paris"]
    assert _flagged("In Ordnung, mit Freude.", "de") == []


def test_an_adopter_may_declare_words_that_are_never_names() -> None:
    text = "Thanks for using Skyfare today."
    assert _flagged(text) == ["Skyfare"]
    config = GuardConfig(ordinary_words={"en": frozenset({"skyfare"})})
    assert ungrounded_values(text, "en", GROUNDS, config) == []


@given(
    st.sampled_from(["The code is {}.", "Use {} at the desk.", "Ref: {}", "{} is yours."]),
    st.from_regex(r"[A-Z]{1,3}[0-9]{1,4}[A-Z0-9]{0,3}", fullmatch=True),
)
def test_any_code_shaped_token_must_be_grounded(template: str, token: str) -> None:
    text = template.format(token)
    assert token in _flagged(text, "en", ())
    assert _flagged(text, "en", (f"booking {token.lower()}",)) == []
