"""The sample domain speaks English, Italian and German: its receipts, notices, cards (titles,
bodies, option labels), refusals, questions and the runtime's own sentences are rendered in the
turn's locale, and every rendered block names the template, version, locale and catalog."""

from __future__ import annotations

import pytest

from turnframe_core import InteractionBlock, NoticeBlock, ReceiptBlock, TransitionBlock
from turnframe_test.understandings import act

REBOOK = act("a1", "trip.request_rebooking", "h1", "Rebook my outbound", leg="outbound")
NAME = act("a1", "trip.set_name", "h1", "Ada Lovelace", name="Ada Lovelace")
EMAIL = act("a1", "trip.set_email", "h1", "ada@example.com", email="ada@example.com")
WITHDRAW = act("a1", "trip.withdraw", "h1", "withdraw")

EXPECTED = {
    "en": {
        "refusal": "A rebooking needs the traveller's name and email first.",
        "name receipt": "Traveller's name set to \u201cAda Lovelace\u201d",
        "ask email": "Done: Traveller's name set to \u201cAda Lovelace\u201d. "
        "Which email address should we use?",
        "card": (
            "Rebook the outbound flight?",
            "The airline will be asked to rebook it; this cannot be undone.",
            ["Rebook", "Keep my flight"],
        ),
        "kept receipt": "The outbound flight is kept as booked",
        "declined": "You said no, so that was not carried out.",
        "closed": "That choice is no longer open, so nothing was done.",
        "confirm card": (
            "Withdraw this trip? It cannot be changed afterwards.",
            ["Confirm", "Cancel"],
        ),
    },
    "it": {
        "refusal": "Per una riprenotazione servono prima il nome e l'email del viaggiatore.",
        "name receipt": "Nome del viaggiatore impostato: \u201cAda Lovelace\u201d",
        "ask email": "Fatto: Nome del viaggiatore impostato: \u201cAda Lovelace\u201d. "
        "Quale indirizzo email dobbiamo usare?",
        "card": (
            "Riprenotare il volo di andata?",
            "Alla compagnia verrà chiesto di riprenotarlo; non si potrà annullare.",
            ["Riprenota", "Tieni il mio volo"],
        ),
        "kept receipt": "Il volo di andata resta com'è",
        "declined": "Hai detto di no, quindi non è stato eseguito.",
        "closed": "Quella scelta non è più aperta, quindi nulla è stato fatto.",
        "confirm card": (
            "Ritirare questo viaggio? Dopo non si potrà più modificare.",
            ["Conferma", "Annulla"],
        ),
    },
    "de": {
        "refusal": "Für eine Umbuchung werden zuerst Name und E-Mail-Adresse des Reisenden "
        "benötigt.",
        "name receipt": "Name des Reisenden auf \u201cAda Lovelace\u201d gesetzt",
        "ask email": "Erledigt: Name des Reisenden auf \u201cAda Lovelace\u201d gesetzt. "
        "Welche E-Mail-Adresse sollen wir verwenden?",
        "card": (
            "Hinflug umbuchen?",
            "Die Fluggesellschaft wird gebeten, ihn umzubuchen; dies kann nicht rückgängig "
            "gemacht werden.",
            ["Umbuchen", "Meinen Flug behalten"],
        ),
        "kept receipt": "Der Hinflug bleibt wie gebucht",
        "declined": "Sie haben mit Nein geantwortet, daher wurde das nicht ausgeführt.",
        "closed": "Diese Auswahl ist nicht mehr offen, daher wurde nichts unternommen.",
        "confirm card": (
            "Diese Reise zurückziehen? Sie kann danach nicht mehr geändert werden.",
            ["Bestätigen", "Abbrechen"],
        ),
    },
}


def _one(turn, kind):
    [block] = [b for b in turn.blocks if isinstance(b, kind)]
    return block


@pytest.mark.parametrize("locale", sorted(EXPECTED))
async def test_receipts_notices_cards_and_questions_in_the_turns_locale(desk, locale):
    want = EXPECTED[locale]
    desk.trip()
    refused = await desk.say("Rebook my outbound", REBOOK, locale=locale)
    named = await desk.say("I am Ada Lovelace", NAME, locale=locale)
    await desk.say("ada@example.com", EMAIL, locale=locale)
    asked = await desk.say("Rebook my outbound", REBOOK, locale=locale)
    card = desk.card(asked)
    kept = await desk.click(card, "opt_keep", locale=locale)
    again = await desk.click(card, "opt_keep", locale=locale)
    confirm = await desk.say("withdraw", WITHDRAW, locale=locale)

    notice = _one(refused, NoticeBlock)
    assert (notice.code, notice.text) == ("turnframe.notice.act_refused", want["refusal"])
    assert notice.copy_ref.template_id == "trip.details_missing"  # the domain's own copy
    assert _one(named, ReceiptBlock).title == want["name receipt"]
    assert _one(named, TransitionBlock).text == want["ask email"]
    assert (card.title, card.body, [o.label for o in card.options]) == want["card"]
    assert _one(kept, ReceiptBlock).title == want["kept receipt"]
    assert _one(kept, NoticeBlock).text == want["declined"]
    assert _one(again, NoticeBlock).text == want["closed"]
    confirmation = _one(confirm, InteractionBlock)
    assert (confirmation.title, [o.label for o in confirmation.options]) == want["confirm card"]

    for turn in (refused, named, kept, again):
        for block in turn.blocks:
            ref = block.copy_ref
            assert ref is not None and ref.locale == locale
            assert ref.catalog_digest.startswith("sha256:") and ref.template_version
    # A card's words are recorded with the turn that raised it: template, parameters, text.
    record = await desk.runtime.replay(desk.account_id, asked.replay_token)
    renders = {r.template_id: r for r in record.copy_renders}
    assert renders["trip.card.rebook.title"].text == card.title
    assert renders["trip.card.rebook.title"].params == {"leg": "outbound"}
    assert renders["trip.card.rebook.keep"].copy_ref.locale == locale
    assert {r.copy_ref.locale for r in record.copy_renders} == {locale}
    confirmed = await desk.runtime.replay(desk.account_id, confirm.replay_token)
    [title] = [r for r in confirmed.copy_renders if r.template_id == "trip.withdraw.confirm"]
    assert (title.text, title.copy_ref.locale) == (confirmation.title, locale)


async def test_the_locale_a_block_fell_back_to_is_recorded_on_it(desk):
    desk.trip()
    swiss = await desk.say("I am Ada Lovelace", NAME, locale="it-CH")
    french = await desk.say("ada@example.com", EMAIL, locale="fr-FR")
    assert swiss.locale == "it-CH" and french.locale == "fr-FR"  # what the user asked for
    assert {b.copy_ref.locale for b in swiss.blocks} == {"it"}  # it-CH -> it
    assert {b.copy_ref.locale for b in french.blocks} == {"en"}  # fr -> the default
    assert _one(swiss, ReceiptBlock).title == EXPECTED["it"]["name receipt"]
    reloaded = await desk.runtime.load_turn(desk.account_id, swiss.turn_id)
    assert [b.copy_ref for b in reloaded.blocks] == [b.copy_ref for b in swiss.blocks]
    record = await desk.runtime.replay(desk.account_id, swiss.replay_token)
    assert {r.copy_ref.locale for r in record.copy_renders} == {"it"}
    assert record.input.locale == "it-CH"
