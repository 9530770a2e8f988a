"""A runtime refuses to start while server copy has a gap a turn could reach, naming each gap,
and looks templates up as rendering does (the locale, then its language)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from turnframe_core import codes
from turnframe_runtime import CatalogCopy, MissingCopy, RuntimeConfig, TurnRuntime
from turnframe_store import MemoryStores
from turnframe_test.domains.travel import (
    TRIP_TEMPLATES,
    TripDesk,
    TripDirectory,
    TripExecutor,
    TripWorkflow,
)


def _start(catalogs: Mapping[str, Mapping[str, str]], *locales: str, workflow: Any = None):
    desk = TripDesk()
    return TurnRuntime(
        stores=MemoryStores(),
        workflows=[workflow or TripWorkflow()],
        directory=TripDirectory(desk),
        executor=TripExecutor(desk),
        copy=CatalogCopy(catalogs),
        config=RuntimeConfig(locales=locales),
    )


def _without(template: str) -> dict[str, dict[str, str]]:
    return {
        locale: {t: text for t, text in templates.items() if t != template}
        for locale, templates in TRIP_TEMPLATES.items()
    }


def test_regional_locales_start_on_their_languages_catalogs() -> None:
    runtime = _start(TRIP_TEMPLATES, "en-GB", "it-IT")
    assert runtime is not None


def test_a_receipt_template_missing_everywhere_is_named_at_start() -> None:
    with pytest.raises(MissingCopy) as info:
        _start(_without("trip.withdrawn.title"), "en", "it-IT")
    assert info.value.missing == (
        ("en", "trip.withdrawn.title"),
        ("it-IT", "trip.withdrawn.title"),
    )
    assert "trip.withdrawn.title" in str(info.value)


def test_a_language_without_its_own_catalog_is_named_not_filled_from_the_default() -> None:
    with pytest.raises(MissingCopy) as info:
        _start(TRIP_TEMPLATES, "en", "de-DE")
    missing = set(info.value.missing)
    assert ("de-DE", codes.NOTICE_COMMAND_FAILED) in missing  # a notice
    assert ("de-DE", "turnframe.card.confirm.title") in missing  # a card
    assert ("de-DE", "trip.name_set.title") in missing  # a receipt
    assert all(locale == "de-DE" for locale, _ in missing)


def test_a_region_catalog_may_hold_only_what_differs_from_its_language() -> None:
    catalogs = {**TRIP_TEMPLATES, "en-GB": {"trip.withdrawn.title": "Trip cancelled"}}
    runtime = _start(catalogs, "en-GB")
    assert runtime is not None
    rendered = CatalogCopy(catalogs).render("trip.withdrawn.title", "en-GB", {})
    assert (rendered.text, rendered.copy_ref.locale) == ("Trip cancelled", "en-GB")


class _Undeclared(TripWorkflow):
    """A workflow that names none of its receipt templates: the start check cannot see them."""

    def receipt_templates(self) -> Sequence[str]:
        return ()


def test_only_declared_receipt_templates_can_be_checked_at_start() -> None:
    catalogs = _without("trip.withdrawn.title")
    assert _start(catalogs, "en", "it", workflow=_Undeclared()) is not None
