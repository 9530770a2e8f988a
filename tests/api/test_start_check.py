"""The runtime refuses to start while a declared locale lacks server copy, naming each gap: a
template that does not exist, or a message of one that the locale's catalogs do not translate."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from turnframe_core import codes
from turnframe_runtime import CopyGap, MissingCopy, RuntimeConfig, TemplateCopy, TurnRuntime
from turnframe_store import MemoryStores
from turnframe_test.copykit import catalog_copy, write_catalog
from turnframe_test.domains.travel import (
    TRIP_COPY,
    TripDesk,
    TripDirectory,
    TripExecutor,
    TripWorkflow,
)


def _start(copy: TemplateCopy, *locales: str, workflow: Any = None) -> TurnRuntime:
    desk = TripDesk()
    return TurnRuntime(
        stores=MemoryStores(),
        workflows=[workflow or TripWorkflow()],
        directory=TripDirectory(desk),
        executor=TripExecutor(desk),
        copy=copy,
        config=RuntimeConfig(locales=locales),
    )


def _trip_without(tmp_path: Path, template: str) -> TemplateCopy:
    return TemplateCopy(catalog_copy(TRIP_COPY, tmp_path / "trip", without_templates=[template]))


def test_regional_locales_start_on_their_languages_catalogs() -> None:
    assert _start(TemplateCopy(TRIP_COPY), "en-GB", "it-IT", "de-CH") is not None


def test_a_declared_template_missing_everywhere_is_named_at_start(tmp_path: Path) -> None:
    with pytest.raises(MissingCopy) as info:
        _start(_trip_without(tmp_path, "trip.withdrawn.title"), "en", "it-IT")
    assert info.value.missing == (
        CopyGap("en", "trip.withdrawn.title"),
        CopyGap("it-IT", "trip.withdrawn.title"),
    )
    assert "it-IT:trip.withdrawn.title (no template)" in str(info.value)


def test_a_language_without_its_own_catalog_is_named_message_by_message(tmp_path: Path) -> None:
    trip = catalog_copy(TRIP_COPY, tmp_path / "trip", without_locales=["de"])
    with pytest.raises(MissingCopy) as info:
        _start(TemplateCopy(trip), "en", "de-DE")
    missing = {(gap.locale, gap.template_id, gap.message) for gap in info.value.missing}
    assert ("de-DE", "trip.name_set.title", "Traveller's name set to %(name)s") in missing
    assert ("de-DE", "trip.card.rebook.confirm", "Rebook") in missing  # a card's label
    assert ("de-DE", "trip.obligation.provide_email", "Which email address should we use?") in (
        missing
    )
    assert all(gap.locale == "de-DE" for gap in info.value.missing)
    assert not any(gap.template_id.startswith("turnframe.") for gap in info.value.missing)


def test_one_untranslated_message_is_named_with_its_template(tmp_path: Path) -> None:
    shop = write_catalog(
        tmp_path / "shop",
        "shop",
        {"shop.greeting": "{% trans %}Hello{% endtrans %} {% trans %}and welcome{% endtrans %}"},
        {"it": {"Hello": "Ciao"}},
    )
    with pytest.raises(MissingCopy) as info:
        _start(TemplateCopy(shop, TRIP_COPY), "en", "it")
    assert info.value.missing == (CopyGap("it", "shop.greeting", "and welcome"),)
    assert 'it:shop.greeting lacks "and welcome"' in str(info.value)


def test_a_region_catalog_may_hold_only_what_differs_from_its_language(tmp_path: Path) -> None:
    british = write_catalog(
        tmp_path / "gb", "trip_gb", {}, {"en-GB": {"Trip withdrawn": "Trip cancelled"}}
    )
    copy = TemplateCopy(british, TRIP_COPY)
    assert _start(copy, "en-GB") is not None
    rendered = copy.serving(["en-GB"]).render("trip.withdrawn.title", "en-GB", {})
    assert (rendered.text, rendered.copy_ref.locale) == ("Trip cancelled", "en-GB")


class _Undeclared(TripWorkflow):
    """A workflow that names none of its templates: the start check cannot see them."""

    def receipt_templates(self) -> Sequence[str]:
        return ()

    def copy_templates(self) -> Sequence[str]:
        return ()


def test_only_declared_templates_can_be_checked_at_start(tmp_path: Path) -> None:
    copy = _trip_without(tmp_path, "trip.withdrawn.title")
    assert _start(copy, "en", "it", workflow=_Undeclared()) is not None


def test_the_library_copy_is_complete_in_every_language_it_ships() -> None:
    copy = TemplateCopy()
    assert copy.missing(["en", "it", "de"]) == []
    assert copy.has(codes.NOTICE_COMMAND_FAILED)
