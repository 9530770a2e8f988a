"""The shipped catalogs are in step with the templates: every message a template uses is in the
domain's .pot and translated (not fuzzy) in each locale's .po, and each compiled .mo holds
exactly what its .po says. `scripts/copy-catalogs` brings them back in step."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.mofile import read_mo
from babel.messages.pofile import read_po, write_po

from turnframe_runtime import LIBRARY_COPY, CopyCatalog, TemplateCopy
from turnframe_test.copykit import catalog_copy
from turnframe_test.domains.travel import TRIP_COPY

ROOT = Path(__file__).resolve().parents[2]

SHIPPED = [(LIBRARY_COPY, ("it", "de")), (TRIP_COPY, ("it", "de"))]


def _messages(catalog: CopyCatalog) -> set[str]:
    copy = TemplateCopy(catalog)
    own = catalog.template_sources()
    return {m.msgid for t in own for m in copy.messages(t)}


@pytest.mark.parametrize(("catalog", "locales"), SHIPPED, ids=lambda c: getattr(c, "domain", ""))
def test_the_pot_holds_every_message_the_templates_use(catalog: CopyCatalog, locales) -> None:
    with (catalog.templates.parent / f"{catalog.domain}.pot").open("rb") as handle:
        pot = {m.id for m in read_po(handle) if m.id}
    assert pot == _messages(catalog), "run scripts/copy-catalogs"


@pytest.mark.parametrize(("catalog", "locales"), SHIPPED, ids=lambda c: getattr(c, "domain", ""))
def test_every_locale_translates_every_message_and_its_mo_is_compiled(
    catalog: CopyCatalog, locales
) -> None:
    wanted = _messages(catalog)
    for locale in locales:
        where = catalog.locales / locale / "LC_MESSAGES"
        with (where / f"{catalog.domain}.po").open("rb") as handle:
            po = {m.id: m for m in read_po(handle) if m.id}
        assert set(po) == wanted, f"{locale}: run scripts/copy-catalogs"
        untranslated = sorted(
            i
            for i, m in po.items()
            if m.fuzzy or not (all(m.string) if isinstance(m.string, tuple) else m.string)
        )
        assert untranslated == [], f"{locale} lacks translations"
        with (where / f"{catalog.domain}.mo").open("rb") as handle:
            mo = {m.id: m.string for m in read_mo(handle) if m.id}
        assert mo == {i: m.string for i, m in po.items()}, f"{locale}: the .mo is stale"


def test_the_script_brings_a_new_message_into_every_catalog(tmp_path: Path) -> None:
    """An adopter's workflow: add a template, run the script, and the new message waits in each
    locale's .po, untranslated, while the start check names it; translate it, run the script
    again, and the locale is whole."""
    trip = catalog_copy(TRIP_COPY, tmp_path / "trip")
    (trip.templates / "trip.greeting.j2").write_text("{% trans %}Have a good trip{% endtrans %}\n")
    _script(trip, "it", "de")
    with (trip.locales / "it" / "LC_MESSAGES" / "travel.po").open("rb") as handle:
        po = read_po(handle)
    assert po["Have a good trip"] is not None and not po["Have a good trip"].string
    gaps = TemplateCopy(trip).missing(["it", "de"])
    assert {(g.locale, g.template_id, g.message) for g in gaps} == {
        ("it", "trip.greeting", "Have a good trip"),
        ("de", "trip.greeting", "Have a good trip"),
    }
    for locale, words in (("it", "Buon viaggio"), ("de", "Gute Reise")):
        path = trip.locales / locale / "LC_MESSAGES" / "travel.po"
        with path.open("rb") as handle:
            po = read_po(handle)
        po["Have a good trip"].string = words
        with path.open("wb") as handle:
            write_po(handle, po)
    _script(trip, "it", "de")
    copy = TemplateCopy(trip)
    assert copy.missing(["it", "de"]) == []
    assert copy.render("trip.greeting", "de", {}).text == "Gute Reise"


def _script(catalog: CopyCatalog, *locales: str) -> None:
    pybabel = Path(sys.executable).parent / "pybabel"
    subprocess.run(
        [str(ROOT / "scripts" / "copy-catalogs"), catalog.domain, str(catalog.templates.parent),
         *locales],
        env={**os.environ, "PYBABEL": str(pybabel)},
        check=True,
        capture_output=True,
    )  # fmt: skip
