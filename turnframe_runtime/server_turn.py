"""A server-written follow-up turn: a turn no user wrote, that tells a conversation what became
of an earlier turn's work (an outbox answer, an outcome settled after the reply).

Rules:
- It is begun like any turn, from `TurnInput.server_turn` with a derived id (each caller derives
  its own: one turn per row and purpose, one per settlement), so a second writer meets the
  first's turn instead of writing another.
- It makes no model call: its reply is composed from the ledger and server copy only, and it is
  accepted, composed and delivered in the caller's transaction (an event never commits without
  the turn that says so).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from turnframe_core.events import DomainEvent
from turnframe_core.replay import PolicyDecisionRecord
from turnframe_core.turn import TurnInput
from turnframe_core.understanding import Understanding
from turnframe_runtime.accept import accept_turn
from turnframe_runtime.compose import TurnResult
from turnframe_runtime.context import NOTHING, Executed, Noticed, merge_notices, noticed
from turnframe_runtime.execute import tell_outcome
from turnframe_runtime.reduce import CaseInView, Plan
from turnframe_runtime.state import TurnState
from turnframe_store.bundle import Stores

if TYPE_CHECKING:
    from turnframe_runtime.kernel import Kernel

__all__ = ["server_turn", "tell"]


def server_turn(
    kernel: Kernel,
    account_id: str,
    conversation_id: str,
    turn_id: str,
    cause: str,
    locale: str,
    decided: Sequence[PolicyDecisionRecord] = (),
) -> TurnState:
    """The follow-up turn `turn_id` begun, `cause` naming what it tells of; `decided`: what
    authorized the commands it tells of (decided by the turn that ran them)."""
    turn_input = TurnInput.server_turn(account_id, conversation_id, turn_id, cause, locale)
    return kernel.begin(turn_input, turn_id, decided=decided)


async def tell(
    kernel: Kernel,
    tx: Stores,
    t: TurnState,
    *,
    notice: str | None = None,
    loaded: Sequence[CaseInView] = (),
    settled: Sequence[Executed] = (),
    readback: Mapping[str, DomainEvent] | None = None,
    outbox_ids: Sequence[str] = (),
    judged: Noticed = NOTHING,
) -> None:
    """Accept, compose and deliver the follow-up turn in `tx`: receipts for what `settled`
    committed (its events read back in `readback`), notices for the rest, for what the commit
    `judged` (a result it could not trust) and `notice`; its
    record names the cases it read (`loaded`), the events and the outbox rows `settled`
    enqueued."""
    user_turn, t.recorder.record = await accept_turn(tx, t.ctx, loaded)
    await tx.commits.commit(t.recorder.accepted(user_turn))
    t.audit.executed = list(settled)
    t.audit.outbox_ids.extend(outbox_ids)
    said = merge_notices(
        *(tell_outcome(t.tell, e.planned.envelope.case_ref, e.outcome) for e in settled),
        judged,
        noticed(notice) if notice is not None else NOTHING,
    )
    result = TurnResult(
        understanding=Understanding(),
        plan=Plan(),
        cases=t.cases,
        readback=readback or {},
        shown=[],
        touched=frozenset(),
        executed=tuple(settled),
        noticed=said,
    )
    composer = kernel.composer(t.ctx, t.copy, t.audit, narrate=False)
    await t.recorder.deliver(tx, await composer.compose(result))
