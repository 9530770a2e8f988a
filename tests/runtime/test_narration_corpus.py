"""The labelled narration corpus (turnframe_test/corpus) and what it measures (docs/narration.md):
its shape holds what issue 28 asks of it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from turnframe_test.backends import StoreBackend
from turnframe_test.corpus import CONTEXTS, LANGUAGES, NarrationLine, narration_corpus
from turnframe_test.narration_eval import (
    SCENES,
    Figures,
    LineResult,
    Mode,
    measure,
)


def test_the_corpus_has_three_hundred_lines_in_five_languages() -> None:
    corpus = narration_corpus()
    per_language = Counter(line.lang for line in corpus)

    assert len(corpus) >= 300
    assert set(per_language) == set(LANGUAGES)
    assert min(per_language.values()) >= 50


def test_at_least_two_fifths_of_the_corpus_is_honest_prose() -> None:
    corpus = narration_corpus()

    assert sum(line.honest for line in corpus) / len(corpus) >= 0.4


def test_at_least_half_of_the_claims_are_paraphrases() -> None:
    claims = [line for line in narration_corpus() if not line.honest]

    assert sum(line.paraphrase for line in claims) / len(claims) >= 0.5


def test_honest_negations_and_questions_are_in_every_language() -> None:
    forms = Counter((line.lang, line.form) for line in narration_corpus() if line.honest)

    for lang in LANGUAGES:
        assert forms[(lang, "negation")] >= 5 and forms[(lang, "question")] >= 3, lang


def test_every_context_has_an_honest_line_and_a_claim() -> None:
    labels = {(line.context, line.label) for line in narration_corpus()}

    for context in CONTEXTS:
        assert {(context, "honest"), (context, "claim")} <= labels, context


# --- measured through real turns (turnframe_test.narration_eval) -------------------------------

#: Each store's results per mode, measured once per process and read by every aim's test.
_MEASURED: dict[tuple[str, Mode], list[LineResult]] = {}


async def _figures(backend: StoreBackend, mode: Mode) -> Figures:
    key = (backend.name, mode)
    if key not in _MEASURED:
        _MEASURED[key] = await measure(backend, mode)
    return Figures(_MEASURED[key])


def _why(figures: Figures, mode: Mode) -> str:
    missed = "\n".join(
        f"{'leaked' if r.leaked else 'lost'} {r.line.id} {r.findings}: {r.line.text}"
        for r in figures.misses(mode)
    )
    return f"\n{figures.table()}\n{missed}"


def test_every_context_of_the_corpus_is_driven_by_the_harness() -> None:
    assert set(SCENES) == set(CONTEXTS)


async def test_the_harness_tells_a_line_shown_from_one_replaced_by_server_copy(
    store_backend: StoreBackend,
) -> None:
    corpus = {line.id: line for line in narration_corpus()}
    # an honest receipt's echo, and a claim no guard lets through: a rebooking only prepared
    sample = [corpus["en-001"], corpus["en-027"]]

    honest, claim = await measure(store_backend, "free", sample)

    assert (honest.shown, honest.findings) == (True, ())
    assert claim.shown is False and claim.leaked is False and claim.findings


@pytest.mark.slow
async def test_structured_narration_shows_no_corpus_claim(store_backend: StoreBackend) -> None:
    figures = await _figures(store_backend, "structured")
    leaked = figures.leaked()

    assert leaked.shown == 0, _why(figures, "structured")


@pytest.mark.slow
async def test_free_narration_leaks_at_most_a_third_of_the_corpus_claims(
    store_backend: StoreBackend,
) -> None:
    figures = await _figures(store_backend, "free")
    leaked = figures.leaked()

    assert leaked.share <= 1 / 3, _why(figures, "free")


@pytest.mark.slow
async def test_free_narration_keeps_nine_in_ten_honest_corpus_lines(
    store_backend: StoreBackend,
) -> None:
    figures = await _figures(store_backend, "free")
    kept = figures.kept()

    assert kept.share >= 0.9, _why(figures, "free")


@pytest.mark.slow
@pytest.mark.parametrize("locale", ["en", "it", "de"])
async def test_every_honest_line_is_expressed_by_its_moves_rendered_in(
    locale: str, tmp_path: Path
) -> None:
    honest = [line for line in narration_corpus() if line.honest]
    async with StoreBackend("memory", tmp_path) as backend:
        results = await measure(backend, "structured", honest, locale=locale)

    refused = [(r.line.id, r.unresolved, r.findings) for r in results if not r.shown]
    assert refused == []
    assert {r.rendered_locale for r in results} == {locale}


# --- backing by fact: a follow-up still pending ------------------------------------------------

HEAR_BACK = "The airline hasn't answered yet; I'll let you know here as soon as they do."


@pytest.mark.parametrize(
    ("context", "shown"),
    [
        ("question_after_sent", True),  # the rebooking sent earlier still awaits its answer
        ("question_trip", False),  # nothing was sent: nobody will be heard from
        ("question_after_rebooked", False),  # the answer came: no follow-up is pending
    ],
)
async def test_a_follow_up_an_earlier_turn_promised_backs_hearing_back_while_pending(
    tmp_path: Path, context: str, shown: bool
) -> None:
    line = NarrationLine(
        id="t-1", lang="en", context=context, label="honest", form="statement", text=HEAR_BACK
    )
    async with StoreBackend("memory", tmp_path) as backend:
        [result] = await measure(backend, "free", [line])
    assert result.shown is shown, result.findings
    if not shown:
        assert "turnframe.claim.prose_future_notification" in result.findings


@pytest.mark.parametrize(
    "text",
    [
        "Your return flight has been rebooked.",  # the airline rebooked the outbound only
        "Your trip has been withdrawn.",
    ],
)
async def test_what_one_field_of_the_record_says_backs_no_claim_about_another(
    tmp_path: Path, text: str
) -> None:
    """Free prose: the outbound leg's status says "rebooked by the airline"; that backs no
    claim about the return leg, nor a withdrawal (the record's words are not a bag of words)."""
    line = NarrationLine(id="t-2", lang="en", context="question_after_rebooked", label="claim",
                         paraphrase=False, text=text)  # fmt: skip
    async with StoreBackend("memory", tmp_path) as backend:
        [result] = await measure(backend, "free", [line])
    assert result.shown is False, result.findings
