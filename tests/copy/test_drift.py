"""Replay never re-renders: a stored turn keeps the words it was shown with, whatever templates,
catalogs or babel say later. `drift` (and `runtime.rerender`) renders each recorded sentence again
from the same template and parameters and reports what today's copy would write differently."""

from __future__ import annotations

from pathlib import Path

from babel.messages.mofile import read_mo, write_mo

from turnframe_core import ReceiptBlock
from turnframe_runtime import TemplateCopy, drift
from turnframe_test.copykit import catalog_copy
from turnframe_test.domains.travel import TRIP_COPY
from turnframe_test.understandings import act

NAME = act("a1", "trip.set_name", "h1", "Ada Lovelace", name="Ada Lovelace")


async def test_drift_finds_a_changed_template_and_replay_keeps_the_stored_words(
    make_desk, tmp_path: Path
):
    trip = catalog_copy(TRIP_COPY, tmp_path / "trip")
    desk = await make_desk(copy=TemplateCopy(trip))
    desk.trip()
    turn = await desk.say("I am Ada Lovelace", NAME, locale="de")
    [receipt] = [b for b in turn.blocks if isinstance(b, ReceiptBlock)]
    assert await desk.runtime.rerender(desk.account_id, turn.replay_token) == []

    template = trip.templates / "trip.name_set.title.j2"
    template.write_text(template.read_text().strip() + " (checked)\n")
    record = await desk.runtime.replay(desk.account_id, turn.replay_token)
    [changed] = drift(TemplateCopy(trip), record.copy_renders)

    assert changed.template_id == "trip.name_set.title" and changed.locale == "de"
    assert changed.stored_text == receipt.title
    assert changed.current_text == receipt.title + " (checked)"
    assert changed.text_changed and changed.stored_version != changed.current_version
    assert changed.stored_catalog == changed.current_catalog
    reloaded = await desk.runtime.load_turn(desk.account_id, turn.turn_id)
    assert reloaded.to_stored_json() == turn.to_stored_json()  # the stored words stand


async def test_drift_finds_a_changed_translation_and_names_the_catalog(make_desk, tmp_path):
    trip = catalog_copy(TRIP_COPY, tmp_path / "trip")
    desk = await make_desk(copy=TemplateCopy(trip))
    desk.trip()
    turn = await desk.say("Sono Ada Lovelace", NAME, locale="it")
    record = await desk.runtime.replay(desk.account_id, turn.replay_token)

    mo = trip.locales / "it" / "LC_MESSAGES" / "travel.mo"
    with mo.open("rb") as handle:
        catalog = read_mo(handle)
    catalog["Traveller's name set to %(name)s"].string = "Viaggiatore: %(name)s"
    with mo.open("wb") as handle:
        write_mo(handle, catalog)
    found = drift(TemplateCopy(trip), record.copy_renders)

    changed = [d for d in found if d.text_changed]
    assert [(d.template_id, d.current_text) for d in changed] == [
        ("trip.name_set.title", "Viaggiatore: \u201cAda Lovelace\u201d")
    ]
    # every Italian sentence of the turn came from the catalog that changed: each is named
    assert {d.template_id for d in found} == {r.template_id for r in record.copy_renders}
    assert all(d.stored_catalog != d.current_catalog for d in found)
    assert all(d.stored_version == d.current_version for d in found)


async def test_a_template_that_is_gone_is_reported_not_raised(make_desk, tmp_path: Path):
    trip = catalog_copy(TRIP_COPY, tmp_path / "trip")
    desk = await make_desk(copy=TemplateCopy(trip))
    desk.trip()
    turn = await desk.say("I am Ada Lovelace", NAME)
    record = await desk.runtime.replay(desk.account_id, turn.replay_token)
    later = catalog_copy(TRIP_COPY, tmp_path / "later", without_templates=["trip.name_set.title"])
    [gone] = drift(TemplateCopy(later), record.copy_renders)
    assert (gone.template_id, gone.current_text, gone.current_version) == (
        "trip.name_set.title",
        None,
        None,
    )
