"""The labelled narration corpus (turnframe_test/corpus) and what it measures (docs/narration.md):
its shape holds what issue 28 asks of it."""

from __future__ import annotations

from collections import Counter

from turnframe_test.corpus import CONTEXTS, LANGUAGES, narration_corpus


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
