"""Step G: understand the user's words through the `Interpreter` port.

The interpreter sees only the brief: opaque handles, the operations on offer and the card on
screen. Its proposal is validated all-or-nothing against what the brief offered; a failed call or
a rejected proposal changes nothing and the turn says so. A click-only turn makes no model call.
What it decided leaves as one value (`Understood`): the understanding, the call, the problems
and the notice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from turnframe_core import codes
from turnframe_core.interactions import Interaction
from turnframe_core.replay import ProviderAttempt
from turnframe_core.understanding import (
    Brief,
    OfferedCard,
    OfferedHandle,
    OfferedOperation,
    OfferedRecord,
    Problem,
    Understanding,
    UnderstandingRejected,
    validate_understanding,
)
from turnframe_runtime import observe
from turnframe_runtime.context import Purpose, TurnContext, provider_attempt
from turnframe_runtime.memory import NOTHING_RECALLED, Recalled, remember
from turnframe_runtime.ports import Interpreter
from turnframe_runtime.reduce import CaseInView

__all__ = ["Understood", "brief_for", "understand"]


@dataclass(frozen=True)
class Understood:
    """G's result: the understanding to plan on (empty when there is none to trust), the model
    call that produced it, the problems a refused proposal had, and the notice the turn shows
    when it understood nothing."""

    understanding: Understanding
    attempt: ProviderAttempt | None = None
    problems: tuple[Problem, ...] = ()
    notice: str | None = None

    @property
    def trusted(self) -> bool:
        """The interpreter answered and its proposal was accepted."""
        return self.attempt is not None and self.notice is None


def brief_for(
    turn: TurnContext,
    handles: Mapping[str, CaseInView],
    card: Interaction | None,
    records: Sequence[OfferedRecord] = (),
    recalled: Recalled = NOTHING_RECALLED,
) -> Brief:
    """What the interpreter may see of this turn: `records`, what the user may name;
    `recalled`, its conversation's last replies, for the brief's memory."""
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
        records=tuple(records),
        memory=remember(recalled, {c.case_ref.key: h for h, c in handles.items()}, turn.now),
    )


async def understand(
    interpreter: Interpreter | None,
    turn: TurnContext,
    handles: Mapping[str, CaseInView],
    card: Interaction | None,
    clock: Callable[[], int],
    records: Sequence[OfferedRecord] = (),
    recalled: Recalled = NOTHING_RECALLED,
) -> Understood:
    """The validated understanding of the turn's text; `records`: what the user may name."""
    text = (turn.input.text or "").strip()
    if not text:
        return Understood(Understanding())
    if interpreter is None:
        return Understood(Understanding(), notice=codes.NOTICE_MESSAGE_UNREADABLE)
    brief = brief_for(turn, handles, card, records, recalled)
    started = clock()
    try:
        with observe.span("model.understand"):
            proposal = await interpreter.understand(brief)
    except Exception as exc:  # any provider failure before commit: no effect
        failed = provider_attempt(Purpose.UNDERSTAND, interpreter, started, clock(), exc)
        return Understood(Understanding(), failed, notice=codes.NOTICE_MESSAGE_UNREADABLE)
    answered = clock()
    try:
        understood = validate_understanding(proposal, brief)
    except UnderstandingRejected as rejected:  # the call answered; its answer was refused
        return Understood(
            Understanding(),
            provider_attempt(
                Purpose.UNDERSTAND, interpreter, started, answered, None, rejected.code
            ),
            tuple(rejected.problems),
            codes.NOTICE_NOT_UNDERSTOOD,
        )
    except Exception as unjudged:  # a proposal no rule could even read: never an effect
        code = codes.code_of(unjudged)
        return Understood(
            Understanding(),
            provider_attempt(Purpose.UNDERSTAND, interpreter, started, answered, None, code),
            (Problem(code=code, path="understanding"),),
            codes.NOTICE_NOT_UNDERSTOOD,
        )
    return Understood(
        understood, provider_attempt(Purpose.UNDERSTAND, interpreter, started, answered)
    )
