"""Copy that cannot be rendered never costs a turn its reply: the start check cannot see a
workflow's parameters, so a sentence that fails to render after the commit is left out (a next
step, a question), stands in with the generic words (a refusal) or leaves no card
(`interaction_unavailable`), and the conversation goes on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from turnframe_core import (
    DomainRefusal,
    InteractionPayload,
    Localized,
    NextStep,
    NoticeBlock,
    ReceiptBlock,
    codes,
)
from turnframe_test.domains.travel import REQUEST_REBOOKING, TripWorkflow
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
