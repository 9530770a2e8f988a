"""The server's own transition follows what each receipt says: a success is done, a refusal is
not done, and a title that ends its own sentence is not stopped twice."""

from __future__ import annotations

from pathlib import Path

from turnframe_core import TransitionBlock
from turnframe_runtime import TemplateCopy
from turnframe_test.copykit import write_catalog
from turnframe_test.domains.travel import TRIP_COPY
from turnframe_test.understandings import act


async def test_a_receipt_title_that_ends_its_sentence_is_not_stopped_twice(
    make_desk, tmp_path: Path
) -> None:
    stopped = "Traveller's name set to %(name)s."
    catalog = write_catalog(
        tmp_path / "stopped",
        "stopped",
        {"trip.name_set.title": "{% trans %}Traveller's name set to {{ name }}.{% endtrans %}"},
        {"it": {stopped: "Nome impostato: %(name)s."}, "de": {stopped: "Name gesetzt: %(name)s."}},
    )
    desk = await make_desk(copy=TemplateCopy(catalog, TRIP_COPY))
    desk.ready_trip()
    for locale, name, done in (
        ("en", "Grace Hopper", "Done: Traveller's name set to “Grace Hopper”."),
        ("it", "Ada Lovelace", "Fatto: Nome impostato: “Ada Lovelace”."),
    ):
        said = f"Name {name}"
        turn = await desk.say(
            said, act("a1", "trip.set_name", "h1", said, name=name), locale=locale
        )
        [transition] = [b for b in turn.blocks if isinstance(b, TransitionBlock)]
        assert transition.author == "server"
        assert transition.text.startswith(f"{done} ")
        assert ".." not in transition.text
