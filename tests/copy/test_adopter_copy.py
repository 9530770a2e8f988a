"""An adopter adds copy for its own workflows, and overrides the library's, through the same
mechanism: its own templates and catalogs, given to `TemplateCopy` before the library's. A
confirmation card states what it confirms, its arguments formatted by babel for the locale."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from turnframe_core import (
    ArgumentSpec,
    CommandPolicy,
    CompiledCommand,
    ConfirmationPolicy,
    InteractionBlock,
    OperationSpec,
    PerCase,
    RiskClass,
    ValueKind,
    ValueRule,
)
from turnframe_runtime import CopyCatalog, MissingCopy, TemplateCopy
from turnframe_test.copykit import write_catalog
from turnframe_test.domains.travel import TRIP_COPY, TripWorkflow
from turnframe_test.understandings import act

REFUND = "trip.refund"
REFUND_SPEC = OperationSpec(
    operation=REFUND,
    summary="Refund an order",
    arguments=(
        ArgumentSpec(name="amount", description="amount", value=ValueRule(kind=ValueKind.AMOUNT)),
        ArgumentSpec(name="order", description="order number"),
    ),
)


class RefundingTrips(TripWorkflow):
    """The trip workflow plus a refund that needs a click, with its own copy."""

    def operations(self, view: Any) -> Sequence[OperationSpec]:
        offered = super().operations(view)
        return (*offered, REFUND_SPEC) if offered else ()

    def compile(self, act: Any, view: Any, state: Mapping[str, Any] | None) -> Any:
        if act.operation != REFUND:
            return super().compile(act, view, state)
        payload = {"amount": str(act.arguments["amount"]), "currency": "EUR"}
        return [
            CompiledCommand(
                command_type=REFUND, payload={**payload, "order": act.arguments["order"]}
            )
        ]

    def policy(self, command_type: str) -> CommandPolicy:
        if command_type == REFUND:
            return CommandPolicy(
                risk=RiskClass.IRREVERSIBLE,
                confirmation=ConfirmationPolicy.EXPLICIT_CLICK,
                atomicity=PerCase(),
            )
        return super().policy(command_type)

    def copy_templates(self) -> Sequence[str]:
        return (*super().copy_templates(), f"{REFUND}.confirm")


def _refund_copy(root: Path, *, german: bool = True) -> CopyCatalog:
    translations = {
        "it": {
            "Refund %(amount)s for order %(order)s?": (
                "Rimborsare %(amount)s per l'ordine %(order)s?"
            ),
            "Not now": "Non ora",
        },
        "de": {
            "Refund %(amount)s for order %(order)s?": (
                "%(amount)s für Bestellung %(order)s erstatten?"
            ),
            "Not now": "Jetzt nicht",
        },
    }
    if not german:
        del translations["de"]
    return write_catalog(
        root,
        "refunds",
        {
            f"{REFUND}.confirm": "{% trans amount=amount|money(currency), order=order %}"
            "Refund {{ amount }} for order {{ order }}?{% endtrans %}",
            # the library's decline label, overridden for this deployment
            "turnframe.card.confirm.decline": "{% trans %}Not now{% endtrans %}",
        },
        translations,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("locale", "title", "labels"),
    [
        ("en", "Refund €12.50 for order A-1?", ["Confirm", "Not now"]),
        ("it", "Rimborsare 12,50\xa0€ per l'ordine A-1?", ["Conferma", "Non ora"]),
        ("de", "12,50\xa0€ für Bestellung A-1 erstatten?", ["Bestätigen", "Jetzt nicht"]),
    ],
)
async def test_a_confirmation_card_states_the_operation_and_its_formatted_arguments(
    make_desk, tmp_path: Path, locale: str, title: str, labels: list[str]
) -> None:
    copy = TemplateCopy(_refund_copy(tmp_path / "refunds"), TRIP_COPY)
    desk = await make_desk(copy=copy, workflow=RefundingTrips())
    desk.ready_trip()
    said = "Refund 12.50 for order A-1"
    turn = await desk.say(said, act("a1", REFUND, "h1", said, amount="12.50", order="A-1"),
                          locale=locale)  # fmt: skip
    [card] = [b for b in turn.blocks if isinstance(b, InteractionBlock)]
    assert card.title == title
    assert [o.label for o in card.options] == labels
    record = await desk.runtime.replay(desk.account_id, turn.replay_token)
    [render] = [r for r in record.copy_renders if r.template_id == f"{REFUND}.confirm"]
    assert render.params == {"amount": "12.50", "currency": "EUR", "order": "A-1"}
    assert (render.text, render.copy_ref.locale) == (title, locale)


async def test_an_adopters_gap_stops_the_runtime_like_the_librarys(make_desk, tmp_path: Path):
    copy = TemplateCopy(_refund_copy(tmp_path / "refunds", german=False), TRIP_COPY)
    with pytest.raises(MissingCopy) as info:
        await make_desk(copy=copy, workflow=RefundingTrips())
    assert {(g.locale, g.template_id) for g in info.value.missing} == {
        ("de", f"{REFUND}.confirm"),
        ("de", "turnframe.card.confirm.decline"),
    }
