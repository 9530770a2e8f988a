from __future__ import annotations

import io
from pathlib import Path

import pytest

from turnframe_core import codes
from turnframe_runtime.config import RuntimeConfig
from turnframe_runtime.copy import MissingCopy, TemplateCopy
from turnframe_runtime.runtime import TurnRuntime
from turnframe_store import MemoryStores
from turnframe_test.copykit import catalog_copy
from turnframe_test.demo import run_demo
from turnframe_test.domains.travel import (
    TRIP_COPY,
    TripDesk,
    TripDirectory,
    TripExecutor,
    TripWorkflow,
)
from turnframe_test.understandings import act


def test_the_runtime_refuses_to_start_naming_every_missing_message(tmp_path: Path):
    trip = catalog_copy(TRIP_COPY, tmp_path / "trip", without_locales=["de"])
    desk = TripDesk()
    with pytest.raises(MissingCopy) as info:
        TurnRuntime(
            stores=MemoryStores(),
            workflows=[TripWorkflow()],
            directory=TripDirectory(desk),
            executor=TripExecutor(desk),
            copy=TemplateCopy(trip),
            config=RuntimeConfig(locales=("en", "de")),
        )
    templates = {gap.template_id for gap in info.value.missing}
    assert "trip.name_set.title" in templates  # the workflow's receipts
    assert "trip.obligation.provide_name" in templates  # its questions
    assert not any(t.startswith("turnframe.") for t in templates)  # the library's de is whole
    assert all(gap.locale == "de" for gap in info.value.missing)


def test_a_rendered_block_records_template_version_locale_and_catalog():
    copy = TemplateCopy(TRIP_COPY)
    en = copy.render(codes.NOTICE_COMMAND_FAILED, "en-GB", {})
    it = copy.render(codes.NOTICE_COMMAND_FAILED, "it", {})
    de = copy.render(codes.NOTICE_COMMAND_FAILED, "de-AT", {})
    assert (en.copy_ref.locale, it.copy_ref.locale, de.copy_ref.locale) == ("en", "it", "de")
    assert (
        len({en.copy_ref.catalog_digest, it.copy_ref.catalog_digest, de.copy_ref.catalog_digest})
        == 3
    )
    assert len({en.text, it.text, de.text}) == 3
    assert en.copy_ref.template_version == it.copy_ref.template_version  # one template


async def test_a_turn_in_italian_renders_italian_server_copy(desk):
    desk.ready_trip()
    turn = await desk.say(
        "Il nome è Grace Hopper",
        act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper"),
        locale="it",
    )
    [receipt] = [b for b in turn.blocks if b.kind == "receipt"]
    assert receipt.title == "Nome del viaggiatore impostato: \u201cGrace Hopper\u201d"
    assert receipt.copy_ref.locale == "it"


async def test_the_demo_runs_its_scripted_conversation_and_reloads_it_identical(desk):
    out = io.StringIO()
    turns = await run_demo(out, desk=desk)
    printed = out.getvalue()
    assert len(turns) >= 6
    kinds = [[b.kind for b in t.blocks] for t in turns]
    assert "receipt" in kinds[0] and "answer" in kinds[0]  # two acts and a question
    assert "interaction" in kinds[1]  # the rebooking card
    assert codes.NOTICE_ALREADY_ANSWERED in printed  # the same card clicked again
    assert codes.NOTICE_ACT_REFUSED in printed  # a command the domain refuses
    assert kinds[-1] == ["answer"]  # a question only
    assert "identical blocks" in printed
    assert "events evt_" in printed  # receipts show the events behind them


class _Undeclared(TripWorkflow):
    """Declares none of its templates, so the start check cannot see a gap."""

    def receipt_templates(self):
        return ()

    def copy_templates(self):
        return ()


async def test_a_receipt_without_its_template_still_gives_the_turn_its_reply(
    make_desk, tmp_path: Path
):
    trip = catalog_copy(TRIP_COPY, tmp_path / "trip", without_templates=["trip.name_set.title"])
    desk = await make_desk(copy=TemplateCopy(trip), workflow=_Undeclared())
    desk.ready_trip()
    turn = await desk.say(
        "Name Grace Hopper", act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper")
    )
    [receipt] = [b for b in turn.blocks if b.kind == "receipt"]
    assert receipt.title == "This was recorded."
    assert receipt.copy_ref.template_id == "turnframe.receipt.recorded"
    assert [e.event_id for e in await desk.events()] == list(receipt.event_ids)
