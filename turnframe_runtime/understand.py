"""Step G: understand the user's words through the `Interpreter` port.

The interpreter sees only the brief: opaque handles, the operations on offer and the card on
screen. Its proposal is validated all-or-nothing against what the brief offered; a failed call or
a rejected proposal changes nothing and the turn says so. A click-only turn makes no model call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from turnframe_core import codes
from turnframe_core.interactions import Interaction
from turnframe_core.understanding import (
    Brief,
    OfferedCard,
    OfferedHandle,
    OfferedOperation,
    Problem,
    Understanding,
    UnderstandingRejected,
    validate_understanding,
)
from turnframe_runtime import observe
from turnframe_runtime.context import AuditTrail, Notes, Purpose, TurnContext
from turnframe_runtime.ports import Interpreter
from turnframe_runtime.reduce import CaseInView

__all__ = ["brief_for", "understand"]


def brief_for(
    turn: TurnContext, handles: Mapping[str, CaseInView], card: Interaction | None
) -> Brief:
    """What the interpreter may see of this turn."""
    operations: dict[str, OfferedOperation] = {}
    for case in handles.values():
        for spec in case.workflow.operations(case.view):
            if spec.proposable and spec.operation not in operations:
                operations[spec.operation] = OfferedOperation(
                    operation=spec.operation,
                    arguments=tuple(a.name for a in spec.arguments),
                    required=tuple(a.name for a in spec.arguments if a.required),
                    rules={a.name: a.value for a in spec.arguments if a.value.kind != "text"},
                )
    card_on_screen = None
    if card is not None:
        card_on_screen = OfferedCard(
            interaction_id=card.interaction_id,
            option_ids=tuple(o.option_id for o in card.payload.options),
            accepts_text=False,
        )
    return Brief(
        text=turn.input.text,
        locale=turn.locale,
        handles=tuple(
            OfferedHandle(handle=h, label=c.label, workflow=c.case_ref.workflow)
            for h, c in handles.items()
        ),
        operations=tuple(operations.values()),
        card_on_screen=card_on_screen,
    )


async def understand(
    interpreter: Interpreter | None,
    turn: TurnContext,
    handles: Mapping[str, CaseInView],
    card: Interaction | None,
    clock: Callable[[], int],
    notes: Notes,
    audit: AuditTrail,
) -> Understanding:
    """The validated understanding of the turn's text (empty when there is none to trust)."""
    text = (turn.input.text or "").strip()
    if not text:
        return Understanding()
    if interpreter is None:
        notes.notice(codes.NOTICE_MESSAGE_UNREADABLE)
        return Understanding()
    brief = brief_for(turn, handles, card)
    started = clock()
    try:
        with observe.span("model.understand"):
            proposal = await interpreter.understand(brief)
    except Exception as exc:  # any provider failure before commit: no effect
        audit.attempt(Purpose.UNDERSTAND, interpreter, started, clock(), exc)
        notes.notice(codes.NOTICE_MESSAGE_UNREADABLE)
        return Understanding()
    audit.attempt(Purpose.UNDERSTAND, interpreter, started, clock())
    try:
        understood = validate_understanding(proposal, brief)
    except UnderstandingRejected as rejected:  # the call answered; its answer was refused
        audit.discard_last_attempt(rejected.code)
        audit.understanding_problems.extend(rejected.problems)
        notes.notice(codes.NOTICE_NOT_UNDERSTOOD)
        return Understanding()
    except Exception as unjudged:  # a proposal no rule could even read: never an effect
        code = codes.code_of(unjudged)
        audit.discard_last_attempt(code)
        audit.understanding_problems.append(Problem(code=code, path="understanding"))
        notes.notice(codes.NOTICE_NOT_UNDERSTOOD)
        return Understanding()
    audit.understanding = understood
    return understood
