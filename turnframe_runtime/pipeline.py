"""One user turn in, one persisted `AssistantTurn` out (DESIGN §5, steps A-V), in order.

The order is the safety property:
- read and judge first (conversation, cases, the card answer): a refused answer writes nothing;
- accept the turn, then understand (a click-only turn makes no model call), then reduce the WHOLE
  turn before any effect;
- claim the answered card, persist pre-execution cards, journal every command before it runs,
  execute batches, and write ONE all-or-nothing commit bundle;
- re-project, persist follow-up cards, compose from events read back from the committed ledger,
  guard the claims, persist the exact turn, then report it.

Each stage lives in its own module, named for what it owns, and the durable points in
`durable`; this one only calls them in order. The caller holds the conversation's lock.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from turnframe_core import codes
from turnframe_core.errors import TurnframeError
from turnframe_core.ids import is_derived_id
from turnframe_core.stream import StreamMode
from turnframe_core.turn import AssistantTurn, InvalidTurnInput, TurnInput
from turnframe_runtime import observe
from turnframe_runtime.accept import PreviousTurnUnfinished
from turnframe_runtime.durable import commit_and_deliver, loaded, understand_and_start
from turnframe_runtime.errors import ConversationBusy, TurnInProgress
from turnframe_runtime.local import accept  # the whole turn, for a click on a local executor

if TYPE_CHECKING:
    from turnframe_runtime.kernel import Kernel

__all__ = ["judged", "run_turn"]


def judged(turn_input: TurnInput) -> TurnInput:
    """A user's turn input, judged again by its rules (a few microseconds): one built with
    model_construct or changed with model_copy(update=...) skipped them. A user's turn never
    takes an id of the form the server derives for its own turns (a follow-up, an event's turn):
    it would stand where that turn is to be written."""
    if not isinstance(turn_input, TurnInput):  # e.g. a dict or JSON: the caller validates
        raise InvalidTurnInput("a turn is given as a TurnInput")
    turn_input = TurnInput.model_validate(turn_input.model_dump(warnings=False))
    if turn_input.is_server_turn:
        raise InvalidTurnInput("a user's turn cannot carry a server turn's origin")
    if turn_input.turn_id is not None and is_derived_id(turn_input.turn_id):
        raise InvalidTurnInput("a user's turn id cannot have the form of a server-derived id")
    return turn_input


async def run_turn(
    kernel: Kernel,
    turn_input: TurnInput,
    turn_id: str | None = None,
    mode: StreamMode = StreamMode.WHOLE,
    on_accepted: asyncio.Event | None = None,
) -> AssistantTurn:
    """One turn, in a span of its own (`turnframe.turn`) with its stages as children."""
    if not observe.ENABLED:
        return await _run(kernel, turn_input, turn_id, mode, on_accepted)
    started = time.perf_counter()
    with observe.span("turn", mode=mode.value, click=turn_input.is_click_only):
        observe.count("turn.received")
        try:
            turn = await _run(kernel, turn_input, turn_id, mode, on_accepted)
        except TurnframeError as error:  # refused, busy, or failed: said by its code
            observe.count("turn.raised", code=error.code)
            if error.code == codes.WORKFLOW_INVARIANT_VIOLATION:
                observe.count("workflow.invariant_violation")
            raise
        observe.count("turn.completed", status=turn.status.value)
        observe.annotate(
            turn_id=turn.turn_id, replay_token=turn.replay_token, status=turn.status.value
        )
        observe.record_ms("turn.duration_ms", (time.perf_counter() - started) * 1000)
        return turn


async def _run(
    kernel: Kernel,
    turn_input: TurnInput,
    turn_id: str | None,
    mode: StreamMode,
    on_accepted: asyncio.Event | None,
) -> AssistantTurn:
    streamed = on_accepted is not None
    with observe.stage("D-F", "load"):
        t = await loaded(kernel, turn_input, turn_id, mode, streamed)
    if observe.ENABLED:
        workflows = {case.case_ref.workflow for case in t.cases.cases.values()}
        only = next(iter(workflows)) if len(workflows) == 1 else None
        observe.annotate(turn_id=t.ctx.turn_id, workflow=only)
    try:
        with observe.stage("A-C", "accept"):
            accepted = await accept(kernel, t, turn_input)  # A/B, C (J-L for a click-only turn)
    except TurnInProgress:
        # The same request was accepted before and has no reply; no turn of this
        # conversation runs beside this one (its lock), so that one was interrupted:
        # finish it now and answer with what it became.
        await kernel.recovery().turn(t.ctx.account_id, t.ctx.turn_id)
        accepted = await accept(kernel, t, turn_input)
    except PreviousTurnUnfinished as previous:
        # A crash left the previous turn unfinished: finish it first (this turn holds the
        # conversation's lock), so this turn's record chains to a record that stays, then
        # read the cases again (finishing it may have changed them). If it cannot be
        # finished now, this turn is refused with that failure, having written nothing.
        await kernel.recovery().turn(t.ctx.account_id, previous.turn_id)
        t = await loaded(kernel, turn_input, t.ctx.turn_id, mode, streamed)
        try:
            accepted = await accept(kernel, t, turn_input)
        except PreviousTurnUnfinished:
            raise ConversationBusy(
                "the conversation's previous turn is unfinished and could not be finished"
            ) from None
    if on_accepted is not None:
        on_accepted.set()
    if isinstance(accepted, AssistantTurn):
        return accepted  # a turn id seen before: its stored reply
    started = accepted.started or await understand_and_start(kernel, t, accepted)  # G-L
    return await commit_and_deliver(kernel, t, accepted.answer, started)  # M-V
