"""Steps A and B: accept the user's turn, idempotently on the client's turn id.

A turn id seen before with the same request returns its stored reply, or raises `TurnInProgress`
while it has none; with another request it raises `IdempotencyKeyReused`. A new
turn is stored with its `received` phase and opens its replay record, chained to the
conversation's previous record; the caller stores that record with the rest of its durable point.
"""

from __future__ import annotations

from collections.abc import Iterable

from turnframe_core.canonical import digest
from turnframe_core.derive import derive_replay_token
from turnframe_core.replay import SEALED_DIGEST_SCHEME, ReplayRecord, TurnPhase, WorkflowVersion
from turnframe_core.turn import AssistantTurn, TurnInput
from turnframe_runtime.context import TurnContext
from turnframe_runtime.errors import IdempotencyKeyReused, TurnFailed, TurnInProgress
from turnframe_runtime.reduce import CaseInView
from turnframe_store.bundle import Stores
from turnframe_store.errors import NotFound
from turnframe_store.records import UserTurnRecord

__all__ = ["PreviousTurnUnfinished", "accept_turn", "prior_reply", "raced_reply"]

_IN_PROGRESS = "this turn was accepted before and has no reply yet"
_FAILED = "this turn failed before any effect; send the request again with a new turn id"


async def raced_reply(stores: Stores, account_id: str, request: TurnInput) -> AssistantTurn | None:
    """After a `Conflict` at accept: a request with the same turn id may have raced this one
    past the prior-reply check; its reply when there is one (`prior_reply`), else None."""
    if request.turn_id is None:
        return None
    return await prior_reply(stores, account_id, request.turn_id, request)


async def prior_reply(
    stores: Stores, account_id: str, turn_id: str, request: TurnInput
) -> AssistantTurn | None:
    """The reply stored for a turn id seen before with this same request; None for a new turn
    id. The same id with another request is `IdempotencyKeyReused`; the same request still
    running (or awaiting recovery) is `TurnInProgress`, and one that ended `failed` before any
    effect is `TurnFailed`."""
    try:
        stored = await stores.conversations.get_user_turn(account_id, turn_id)
    except NotFound:
        return None
    if digest(stored.input) != digest(request):
        raise IdempotencyKeyReused("this turn id was used before for a different request")
    try:
        return await stores.conversations.get_assistant_turn(account_id, turn_id)
    except NotFound:
        pass
    try:
        failed = (await stores.conversations.get_phase(account_id, turn_id)).phase
        if failed is TurnPhase.FAILED:  # it never had an effect: a retry needs a new id
            record = await stores.replay.get(account_id, turn_id)
            raise TurnFailed(_FAILED, record.failure_code)
    except NotFound:
        pass
    raise TurnInProgress(_IN_PROGRESS)


class PreviousTurnUnfinished(Exception):
    """The conversation's previous turn was interrupted and never finished: recovery finishes
    it before a new turn chains its record to that turn's (whose record recovery would change)."""

    def __init__(self, turn_id: str) -> None:
        super().__init__(turn_id)
        self.turn_id = turn_id


async def accept_turn(
    stores: Stores, turn: TurnContext, loaded: Iterable[CaseInView]
) -> tuple[UserTurnRecord, ReplayRecord]:
    """The user turn as received and its first replay record, chained to the conversation's
    previous record; both are written by the durable point's bundle. A previous turn that
    never finished raises `PreviousTurnUnfinished`: it is finished first."""
    user_turn = UserTurnRecord(
        account_id=turn.account_id,
        conversation_id=turn.conversation_id,
        turn_id=turn.turn_id,
        received_at=turn.now,
        input=turn.input,
    )
    previous = await stores.replay.last_for_conversation(turn.account_id, turn.conversation_id)
    if previous is not None and not previous.phase.is_terminal and previous.turn_id != turn.turn_id:
        raise PreviousTurnUnfinished(previous.turn_id)
    cases = list(loaded)
    record = ReplayRecord(
        turn_id=turn.turn_id,
        conversation_id=turn.conversation_id,
        account_id=turn.account_id,
        replay_token=derive_replay_token(turn.turn_id),
        phase=TurnPhase.RECEIVED,
        # After the previous turn's records even within one clock tick: stores list a
        # conversation's records by when each turn was first recorded, and the chain follows.
        recorded_at=turn.now if previous is None else max(turn.now, previous.recorded_at + 1),
        input=turn.input,
        previous_digest=previous.digest() if previous is not None else None,
        digest_scheme=SEALED_DIGEST_SCHEME,
        loaded_cases=tuple(case.case_ref for case in cases),
        workflow_versions=tuple(
            sorted(
                {WorkflowVersion(key=c.workflow.key, version=c.workflow.version) for c in cases},
                key=lambda v: v.key,
            )
        ),
    )
    return user_turn, record
