"""What the wording guard costs per block of model prose: `check_wording` and
`ungrounded_values` over a few hundred realistic blocks in English, Italian, German, French and
Spanish (honest prose and false claims mixed, two to four sentences each), against a plain regex
pass over the same blocks (the baseline, measured in the same run).

Rows (ms of this process's CPU time per block, best of 5 rounds over every block, ratio to the
baseline; CPU time, so a busy machine's waits are not counted):
- regex baseline: one compiled pattern's `findall` over the block;
- check_wording: the claim rules of all five languages, the language check, ids;
- ungrounded_values, grounds seen before: every ground already read (each is cached);
- ungrounded_values, one new ground: a new user message beside grounds seen before (a later
  turn of a conversation);
- ungrounded_values, all grounds new: no ground seen before (a conversation's first turn);
- free path, one new ground / all grounds new: what the runtime's free path pays per block
  (`check_wording`, then `ungrounded_values` on what it passed); the same over the blocks the
  guard passes only (the dearest: every one is grounded);
- both on every block: both functions whatever the guard found (an upper bound).
The issue's aim: under 0.5 ms per block.

Run: `.venv/bin/python benchmarks/wording_guard.py [--blocks N]`.
"""

from __future__ import annotations

import argparse
import itertools
import re
import time
from collections.abc import Callable, Sequence

from turnframe_core.wording import TurnBacking, check_wording, ungrounded_values

#: sentences as assistant models write them around a travel desk's blocks, per language
SENTENCES: dict[str, tuple[str, ...]] = {
    "en": (
        "Thanks, Ada, I've got that.",
        "Your flights haven't been changed.",
        "Here is where things stand with your trip to Rome.",
        "The outbound flight LH-1234 leaves on Friday, 14 March at 09:10.",
        "Would you like me to send the rebooking to the airline?",
        "You're on the 14:10 departure now.",
        "Your new booking reference is K7XQ2M.",
        "Nothing was cancelled, and your return flight is still booked.",
        "Is there anything else now that your flight has been rebooked?",
        "Please confirm below.",
        "The refund of €120 goes back to ada@example.com.",
        "I'll let you know as soon as the airline answers.",
    ),
    "it": (
        "Grazie, Ada, ho capito.",
        "I tuoi voli non sono stati modificati.",
        "Ecco la situazione del tuo viaggio a Roma.",
        "Il volo di andata LH-1234 parte venerdì 14 marzo alle 9:10.",
        "Vuoi che invii la riprenotazione alla compagnia?",
        "Ora sei sul volo delle 14:10.",
        "Il tuo nuovo codice di prenotazione è K7XQ2M.",
        "Non è stato annullato nulla e il volo di ritorno resta prenotato.",
        "Posso fare altro ora che il volo è stato riprenotato?",
        "Conferma qui sotto, per favore.",
    ),
    "de": (
        "Danke, Ada, das habe ich verstanden.",
        "Ihre Flüge wurden nicht geändert.",
        "Hier ist der aktuelle Stand Ihrer Reise nach Rom.",
        "Der Hinflug LH-1234 startet am Freitag, 14. März, um 9:10 Uhr.",
        "Soll ich die Umbuchung an die Airline senden?",
        "Sie sind jetzt auf dem Flug um 14:10 Uhr.",
        "Ihre neue Buchungsnummer ist K7XQ2M.",
        "Es wurde nichts storniert, und Ihr Rückflug ist weiterhin gebucht.",
        "Kann ich sonst noch helfen, jetzt wo Ihr Flug umgebucht wurde?",
        "Bitte unten bestätigen.",
    ),
    "fr": (
        "Merci, Ada, c'est noté.",
        "Vos vols n'ont pas été modifiés.",
        "Voici où en est votre voyage à Rome.",
        "Le vol aller LH-1234 part le vendredi 14 mars à 9h10.",
        "Voulez-vous que j'envoie la demande à la compagnie ?",
        "Vous êtes désormais sur le vol de 14h10.",
        "Votre nouvelle référence de réservation est K7XQ2M.",
        "Rien n'a été annulé et votre vol retour reste réservé.",
        "Puis-je faire autre chose maintenant que votre vol a été modifié ?",
        "Merci de confirmer ci-dessous.",
    ),
    "es": (
        "Gracias, Ada, entendido.",
        "Tus vuelos no han sido modificados.",
        "Así está tu viaje a Roma.",
        "El vuelo de ida LH-1234 sale el viernes 14 de marzo a las 9:10.",
        "¿Quieres que envíe el cambio a la aerolínea?",
        "Ahora estás en el vuelo de las 14:10.",
        "Tu nuevo código de reserva es K7XQ2M.",
        "No se ha cancelado nada y tu vuelo de vuelta sigue reservado.",
        "¿Puedo ayudarte en algo más ahora que tu vuelo ha sido cambiado?",
        "Confirma abajo, por favor.",
    ),
}
#: what a turn may state: facts' values, a receipt's title, a card's labels, the user's words
GROUNDS = (
    "Ada Lovelace",
    "ada@example.com",
    "2027-03-14",
    "Outbound LH-1234 2027-03-14T09:10",
    "booked",
    "Rebooking request sent to Lufthansa",
    "Rebook",
    "Keep my flight",
    "Can you move my trip to Rome?",
)
_BASELINE = re.compile(r"\b\w+(?:'\w+)?\b")


def blocks(count: int) -> list[tuple[str, str]]:
    """`count` blocks of two to four sentences, cycling through the languages."""
    made: list[tuple[str, str]] = []
    for n in itertools.count():
        for locale, sentences in SENTENCES.items():
            size = 2 + n % 3
            start = (n * 5) % len(sentences)
            chosen = [sentences[(start + k * 3) % len(sentences)] for k in range(size)]
            made.append((locale, " ".join(chosen)))
            if len(made) == count:
                return made
    return made


def _best(
    run: Callable[[Sequence[tuple[str, str]]], object], blocks_: list[tuple[str, str]]
) -> float:
    rounds = []
    for _ in range(5):
        start = time.process_time()
        run(blocks_)
        rounds.append((time.process_time() - start) / len(blocks_) * 1e3)
    return min(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=300)
    measured = blocks(parser.parse_args().blocks)
    backing = TurnBacking()
    turns = itertools.count()

    def baseline(bs: Sequence[tuple[str, str]]) -> None:
        for _, text in bs:
            _BASELINE.findall(text)

    def wording(bs: Sequence[tuple[str, str]]) -> None:
        for locale, text in bs:
            check_wording(text, locale, backing)

    def grounded_cached(bs: Sequence[tuple[str, str]]) -> None:
        for locale, text in bs:
            ungrounded_values(text, locale, GROUNDS)

    def fresh(every: bool) -> tuple[str, ...]:
        turn = next(turns)
        seen = tuple(f"{g} #{turn}" for g in GROUNDS) if every else GROUNDS
        return (*seen, f"turn {turn}")

    def grounded(every: bool) -> Callable[[Sequence[tuple[str, str]]], None]:
        def run(bs: Sequence[tuple[str, str]]) -> None:
            for locale, text in bs:
                ungrounded_values(text, locale, fresh(every))

        return run

    def both(every: bool) -> Callable[[Sequence[tuple[str, str]]], None]:
        """The free path as the runtime runs it: grounding only what the guard passed."""

        def run(bs: Sequence[tuple[str, str]]) -> None:
            for locale, text in bs:
                grounds = fresh(every)
                _ = check_wording(text, locale, backing) or ungrounded_values(text, locale, grounds)

        return run

    def both_always(every: bool) -> Callable[[Sequence[tuple[str, str]]], None]:
        """Both checks on every block, whatever the guard found (an upper bound)."""

        def run(bs: Sequence[tuple[str, str]]) -> None:
            for locale, text in bs:
                grounds = fresh(every)
                check_wording(text, locale, backing)
                ungrounded_values(text, locale, grounds)

        return run

    locale, text = measured[0]
    start = time.perf_counter()
    check_wording(text, locale, backing)
    first = (time.perf_counter() - start) * 1e3
    base = _best(baseline, measured)
    honest = [
        (locale, text) for locale, text in measured if not check_wording(text, locale, backing)
    ]
    rows = [
        ("regex baseline", base),
        ("check_wording", _best(wording, measured)),
        ("ungrounded_values, grounds seen before", _best(grounded_cached, measured)),
        ("ungrounded_values, one new ground", _best(grounded(False), measured)),
        ("ungrounded_values, all grounds new", _best(grounded(True), measured)),
        ("free path, one new ground", _best(both(False), measured)),
        ("free path, all grounds new", _best(both(True), measured)),
        ("free path, honest blocks, all grounds new", _best(both(True), honest)),
        ("both on every block, all grounds new", _best(both_always(True), measured)),
    ]
    flagged = sum(1 for locale, text in measured if check_wording(text, locale, backing))
    print(f"{len(measured)} blocks in {len(SENTENCES)} languages ({flagged} refused by the guard)")
    print(f"{'row':<42}{'ms/block':>10}{'ratio':>10}")
    for name, millis in rows:
        print(f"{name:<42}{millis:>10.3f}{millis / base:>10.1f}")
    print(f"{'first call (patterns already compiled)':<42}{first:>10.3f}")


if __name__ == "__main__":
    main()
