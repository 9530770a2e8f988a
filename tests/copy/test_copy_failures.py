"""Copy that cannot be rendered never costs a turn its reply, and is never silent. The start check
renders every template with the samples its catalog or workflow declares, and refuses one that
cannot render. What it cannot see (the parameters a workflow gives at run time) is counted and
logged as `copy.fallback` when it fails: a sentence that fails to render after the commit is left
out (a next step, a question), stands in with the generic words (a refusal) or leaves no card
(`interaction_unavailable`), and the conversation goes on."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from turnframe_core import (
    DomainRefusal,
    InteractionPayload,
    Localized,
    Move,
    MoveKind,
    NextStep,
    NoticeBlock,
    ReceiptBlock,
    codes,
)
from turnframe_runtime import CopyCatalog, CopyRenderError, MissingCopy, TemplateCopy
from turnframe_test import ScriptedNarrator
from turnframe_test.copykit import write_catalog
from turnframe_test.domains.travel import REQUEST_REBOOKING, TRIP_COPY, TripWorkflow
from turnframe_test.sample import travel
from turnframe_test.telemetry_kit import captured_telemetry
from turnframe_test.understandings import act

NAME = act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper")
REBOOK = act("a1", REQUEST_REBOOKING, "h1", "Rebook my outbound", leg="outbound")


class _BrokenNextStep(TripWorkflow):
    def next_steps(self, view: Any) -> Sequence[NextStep]:
        steps = super().next_steps(view)
        broken = Localized(template_id="trip.card.rebook.title")  # needs `leg`, given none
        return [s.model_copy(update={"words": broken}) for s in steps]


class _BrokenCard(TripWorkflow):
    def build_interaction(self, requirement: Any, view: Any, state: Any) -> InteractionPayload:
        payload = super().build_interaction(requirement, view, state)
        return payload.model_copy(update={"body": Localized(template_id="trip.no_such_body")})


class _BrokenRefusal(TripWorkflow):
    def compile(self, act: Any, view: Any, state: Mapping[str, Any] | None) -> Any:
        if act.operation == "trip.set_name":  # names a template that needs `leg`
            return DomainRefusal(
                code="trip.odd", explanation=Localized(template_id="trip.already_sent")
            )
        return super().compile(act, view, state)


async def test_a_next_step_that_cannot_be_rendered_is_left_out(make_desk):
    control = await make_desk()
    control.ready_trip(name="Ada Lovelace")
    shown = await control.say("Grace Hopper", NAME, locale="it")
    assert [o.words for o in shown.offers] == ["Riprenotare un volo"]

    desk = await make_desk(workflow=_BrokenNextStep())
    desk.ready_trip(name="Ada Lovelace")
    turn = await desk.say("Grace Hopper", NAME, locale="it")
    assert [b.kind for b in turn.blocks] == ["receipt", "transition"]
    assert turn.offers == ()
    [receipt] = [b for b in turn.blocks if isinstance(b, ReceiptBlock)]
    assert "Grace Hopper" in receipt.title


async def test_a_card_whose_copy_cannot_be_rendered_is_not_raised(make_desk):
    desk = await make_desk(workflow=_BrokenCard())
    desk.ready_trip()
    turn = await desk.say("Rebook my outbound", REBOOK, locale="de")
    assert isinstance(turn.blocks[0], ReceiptBlock)  # the rebooking was recorded
    assert "interaction" not in [b.kind for b in turn.blocks]
    assert codes.NOTICE_INTERACTION_UNAVAILABLE in desk.notice_codes(turn)
    later = await desk.say("Grace Hopper", NAME, locale="de")  # the conversation goes on
    assert later.blocks[0].kind == "receipt"


async def test_a_refusal_whose_copy_cannot_be_rendered_says_the_generic_words(make_desk):
    desk = await make_desk(workflow=_BrokenRefusal())
    desk.ready_trip()
    turn = await desk.say("Grace Hopper", NAME, locale="it")
    [notice] = [b for b in turn.blocks if isinstance(b, NoticeBlock)]
    assert notice.code == codes.NOTICE_COMMAND_FAILED
    assert notice.text == "Non è andato a buon fine, quindi non è cambiato nulla."


# --- loud failures: counted and logged at run time, refused at start ---------------------------


async def test_every_fallback_is_logged_and_counted_by_template_and_code(make_desk):
    telemetry = captured_telemetry()
    desk = await make_desk(workflow=_BrokenNextStep())
    desk.ready_trip(name="Ada Lovelace")
    await desk.say("Grace Hopper", NAME, locale="it")
    counted = [
        (attributes, value)
        for metric, attributes, value in telemetry.metric_points()
        if metric == "turnframe.copy.fallback"
    ]
    template = "trip.card.rebook.title"
    assert counted == [
        ({"turnframe.template": template, "turnframe.code": codes.COPY_RENDER_FAILED}, 1)
    ]
    [logged] = [r for r in telemetry.logs.records if r.getMessage() == "copy.fallback"]
    assert logged.turnframe == {  # type: ignore[attr-defined]
        "event": "copy.fallback",
        "template_id": template,
        "code": codes.COPY_RENDER_FAILED,
    }


def _catalog_with(
    tmp_path: Path, templates: dict[str, str], samples: dict[str, Any] | None = None
) -> CopyCatalog:
    catalog = write_catalog(tmp_path / "broken", "broken", templates, {"it": {}, "de": {}})
    if samples is not None:
        (catalog.templates / "samples.json").write_text(json.dumps(samples))
    return catalog


async def test_a_template_that_includes_a_missing_one_refuses_the_start_naming_both(
    make_desk, tmp_path: Path
):
    catalog = _catalog_with(tmp_path, {"trip.name_set.title": '{% include "trip.gone" %}'})
    with pytest.raises(MissingCopy) as refused:
        await make_desk(copy=TemplateCopy(catalog, TRIP_COPY))
    gaps = {(g.template_id, g.problem, g.message) for g in refused.value.missing}
    assert (
        "trip.name_set.title",
        "does not render",
        "it includes 'trip.gone', which no catalog holds",
    ) in gaps
    assert "trip.gone" in str(refused.value)


async def test_a_template_that_uses_an_undefined_name_refuses_the_start_with_its_samples(
    make_desk, tmp_path: Path
):
    templates = {"trip.name_set.title": "Name set to {{ name }} by {{ agent_name }}"}
    samples = {"trip.name_set.title": {"name": "Ada"}}
    catalog = _catalog_with(tmp_path, templates, samples)
    with pytest.raises(MissingCopy) as refused:
        await make_desk(copy=TemplateCopy(catalog, TRIP_COPY))
    [gap] = [
        g for g in refused.value.missing if g.problem == "does not render" and g.locale == "en"
    ]
    assert gap.template_id == "trip.name_set.title" and "agent_name" in (gap.message or "")


class _DeclaresSamples(TripWorkflow):
    def copy_samples(self) -> Mapping[str, Sequence[Mapping[str, Any]]]:
        return {"trip.rebooked.title": [{"leg": "outbound"}]}  # lacks `reference`


async def test_a_workflows_own_samples_are_rendered_before_the_start(make_desk):
    with pytest.raises(MissingCopy) as refused:
        await make_desk(workflow=_DeclaresSamples())
    rendered = {g.template_id for g in refused.value.missing if g.problem == "does not render"}
    assert rendered == {"trip.rebooked.title"}


async def test_an_option_effect_that_does_not_render_with_its_cards_metadata_refuses_the_start(
    make_desk, tmp_path: Path
):
    # the trip's samples give `trip.option.opt_rebook` what a rebooking card holds: a `leg`
    catalog = _catalog_with(tmp_path, {"trip.option.opt_rebook": "Rebooks {{ flight }}."})
    with pytest.raises(MissingCopy) as refused:
        await make_desk(copy=TemplateCopy(catalog, TRIP_COPY))
    rendered = {(g.template_id, g.problem) for g in refused.value.missing}
    assert rendered == {("trip.option.opt_rebook", "does not render")}


async def test_the_trip_needs_its_option_effects_even_when_their_template_is_gone(
    make_desk, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    shutil.copytree(TRIP_COPY.templates, tmp_path / "templates")
    (tmp_path / "templates" / "trip.option.opt_keep.j2").unlink()
    # as if the trip's own catalog had lost the file: its listing no longer names it
    gone = travel._TEMPLATE_IDS - {"trip.option.opt_keep"}
    monkeypatch.setattr(travel, "_TEMPLATE_IDS", gone)
    catalog = CopyCatalog(
        domain="travel", templates=tmp_path / "templates", locales=TRIP_COPY.locales
    )
    with pytest.raises(MissingCopy) as refused:
        await make_desk(copy=TemplateCopy(catalog))
    assert {(g.locale, g.template_id, g.message) for g in refused.value.missing} == {
        (locale, "trip.option.opt_keep", None) for locale in ("en", "it", "de")
    }


class _CardWithoutLeg(TripWorkflow):
    def build_interaction(self, requirement: Any, view: Any, state: Any) -> InteractionPayload:
        payload = super().build_interaction(requirement, view, state)
        return payload.model_copy(update={"metadata": {}})


async def test_an_option_effect_that_cannot_render_is_left_out_and_logged(make_desk):
    telemetry = captured_telemetry()
    narrator = ScriptedNarrator().transition_moves(Move(move=MoveKind.CLOSE))
    desk = await make_desk(workflow=_CardWithoutLeg(), narrator=narrator)
    desk.ready_trip()
    turn = await desk.say("Rebook my outbound", REBOOK)
    [request] = narrator.calls_for("transition")
    [card] = [r for r in request.refs if r.kind == "card"]
    assert [o.effect for o in card.options] == [None, None]
    assert desk.card(turn).block_id == card.ref  # the card is shown all the same
    logged = {
        r.turnframe["template_id"]  # type: ignore[attr-defined]
        for r in telemetry.logs.records
        if r.getMessage() == "copy.fallback"
    }
    assert logged == {"trip.option.opt_rebook", "trip.option.opt_keep"}


def test_rendering_a_template_whose_include_is_missing_names_the_include(tmp_path: Path):
    catalog = _catalog_with(tmp_path, {"trip.name_set.title": '{% include "trip.gone" %}'})
    with pytest.raises(CopyRenderError, match=r"trip\.gone"):
        TemplateCopy(catalog, TRIP_COPY).render("trip.name_set.title", "en", {})
    with pytest.raises(MissingCopy, match=r"trip\.nowhere"):
        TemplateCopy(catalog, TRIP_COPY).render("trip.nowhere", "en", {})
