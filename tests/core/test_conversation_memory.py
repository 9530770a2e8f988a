"""The brief's conversation memory: typed, capped, naming only the brief's own handles, and
absent from a brief's JSON while empty."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from turnframe_core.canonical import canonical_json
from turnframe_core.understanding import (
    MEMORY_ITEMS,
    MEMORY_MAX_CHARS,
    MEMORY_MISSING,
    MEMORY_TURNS,
    Brief,
    CardEnding,
    ConversationMemory,
    ExpectationKind,
    OfferedHandle,
    RememberedCard,
    RememberedOffer,
    RememberedQuestion,
    RememberedTurn,
)


def _handle(n: int) -> str:
    return "h" + format(n, "x").rjust(32, "z")  # the longest a handle may be


def _longest_memory() -> ConversationMemory:
    """Every list full, every name and id at its longest."""
    name = "a" * 100
    interaction = [f"int_{n:Z>128}" for n in range(MEMORY_ITEMS)]
    handles = tuple(_handle(n) for n in range(MEMORY_ITEMS))
    return ConversationMemory(
        open_questions=tuple(
            RememberedQuestion(
                turns_ago=MEMORY_TURNS,
                kind=ExpectationKind.AWAITING_CONFIRMATION,
                handle=handles[n],
                operation=name,
                missing=(name,) * MEMORY_MISSING,
                interaction_id=interaction[n],
            )
            for n in range(MEMORY_ITEMS)
        ),
        offers=tuple(
            RememberedOffer(turns_ago=MEMORY_TURNS, operation=name, handle=handles[n])
            for n in range(MEMORY_ITEMS)
        ),
        cards=tuple(
            RememberedCard(
                turns_ago=MEMORY_TURNS,
                interaction_id=interaction[n],
                handle=handles[n],
                ending=CardEnding.SUPERSEDED,
                chosen_option="opt_" + "Z" * 128,
                choices=handles,
                chosen_handle=handles[n],
            )
            for n in range(MEMORY_ITEMS)
        ),
        turns=tuple(
            RememberedTurn(turns_ago=MEMORY_TURNS, handles=handles) for _ in range(MEMORY_TURNS)
        ),
    )


def test_the_longest_memory_fits_the_documented_bound() -> None:
    assert len(canonical_json(_longest_memory().model_dump(mode="json"))) <= MEMORY_MAX_CHARS


def test_a_memory_holds_no_more_items_than_its_caps() -> None:
    offer = RememberedOffer(turns_ago=1, operation="trip.withdraw")
    with pytest.raises(ValidationError):
        ConversationMemory(offers=(offer,) * (MEMORY_ITEMS + 1))
    with pytest.raises(ValidationError):
        RememberedOffer(turns_ago=MEMORY_TURNS + 1, operation="trip.withdraw")


def test_a_memory_names_operations_by_a_workflow_s_names_never_by_words() -> None:
    with pytest.raises(ValidationError):
        RememberedOffer(turns_ago=1, operation="Rebook my flight to Rome")


def test_a_brief_without_memory_serializes_as_it_did_before_memory() -> None:
    brief = Brief(text="hi", locale="en")
    assert brief.model_dump(mode="json") == {
        "text": "hi",
        "locale": "en",
        "handles": [],
        "operations": [],
        "card_on_screen": None,
        "new_record_workflows": [],
    }


def test_a_brief_s_memory_names_only_handles_the_brief_issues() -> None:
    issued = (OfferedHandle(handle="h1", label="Rome trip", workflow="trip"),)
    remembered = ConversationMemory(turns=(RememberedTurn(turns_ago=1, handles=("h2",)),))
    with pytest.raises(ValidationError, match="memory names only the handles"):
        Brief(text="hi", locale="en", handles=issued, memory=remembered)


def test_a_brief_with_memory_reads_back_from_its_json() -> None:
    issued = (OfferedHandle(handle="h1", label="Rome trip", workflow="trip"),)
    remembered = ConversationMemory(
        offers=(RememberedOffer(turns_ago=1, operation="trip.withdraw", handle="h1"),)
    )
    brief = Brief(text="hi", locale="en", handles=issued, memory=remembered)
    assert Brief.model_validate_json(brief.model_dump_json()) == brief
