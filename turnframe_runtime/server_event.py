"""A server event (DESIGN §16): an event from outside, or a timer, told to its conversation as a
server turn that runs the workflow's own command for it (steps A-V, without a model).

Rules, in the order they apply:
1. The origin is verified first: an origin the runtime does not know, or a signature that does
   not verify, is `OriginNotVerified` before anything is read.
2. Under the conversation's lock, the conversation must exist (`NotFound`). The turn's id is
   derived from (account, origin, idempotency key): the same event again (a sender's retry, a
   timer claimed again) meets the turn it began and gets its stored reply; the same key with
   another event is `IdempotencyKeyReused`. A turn it meets unfinished is finished first, as
   recovery finishes it, once its phase marker is `RuntimeConfig.timer_lease_ms` old; a younger
   one may still run in another process (on SQLite the conversation lock is a process's own),
   and is `TurnInProgress`, having written nothing.
3. The case is read as any turn reads it (authorized, projected, its view checked); a workflow
   or a case the account does not have is `NotFound`, the same for both. The workflow must
   offer the operation in the case's view, and its own `compile` makes the commands; a refusal
   is `ServerEventRefused`. Nothing is written before this point.
4. The workflow's policy judges the commands with the origin's `CommandOrigin` (reduce's rules
   5 and 6): they run now, or wait for the confirmation card a user's click would satisfy (the
   card is the turn's reply), or, when nothing could authorize them, the event is refused.
5. The turn is accepted and started in ONE transaction (the user-less turn, the card, every
   command journaled by its idempotency key), then executed, committed and delivered through
   the same durable points as any turn, its reply composed from the ledger and server copy in
   the conversation's locale (no model call). A crash after the start is finished by recovery,
   by idempotency key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnframe_core.cases import CaseKey
from turnframe_core.commands import CommandOrigin
from turnframe_core.errors import TurnframeError
from turnframe_core.ids import derive_id
from turnframe_core.replay import TargetResolutionRecord, TurnPhase
from turnframe_core.server_events import ServerEvent
from turnframe_core.turn import SERVER_TURN_ORIGIN, AssistantTurn, InvalidTurnInput
from turnframe_core.understanding import Understanding
from turnframe_core.workflow import DomainRefusal, ResolvedAct
from turnframe_runtime import observe
from turnframe_runtime.accept import PreviousTurnUnfinished
from turnframe_runtime.cards import RaisedCard
from turnframe_runtime.context import NOTHING
from turnframe_runtime.durable import Planned, accept_and_start, commit_and_deliver
from turnframe_runtime.errors import (
    ConversationBusy,
    IdempotencyKeyReused,
    OriginNotVerified,
    ServerEventRefused,
    TurnFailed,
    TurnInProgress,
)
from turnframe_runtime.reduce import ActResult, CaseInView, Plan, judge_commands
from turnframe_runtime.server_turn import server_turn
from turnframe_runtime.state import TurnState
from turnframe_store.bundle import Stores
from turnframe_store.errors import Conflict, NotFound

if TYPE_CHECKING:
    from turnframe_runtime.kernel import Kernel

__all__ = [
    "conversation_locale",
    "event_turn_id",
    "judged_event",
    "run_server_event",
    "verified_origin",
]

#: the act id of the event's operation (a server turn has no user act)
_ACT = "event"
_NOT_VERIFIED = "the event's origin could not be verified"
#: the most replies read back for the conversation's locale
_LOCALE_WINDOW = 20


def event_turn_id(account_id: str, origin: str, idempotency_key: str) -> str:
    """The id of the server turn an event becomes: one per (account, origin, key)."""
    return derive_id(
        "turn",
        "turnframe.server_event_turn.v1",
        {"account_id": account_id, "origin": origin, "idempotency_key": idempotency_key},
    )


def judged_event(event: ServerEvent) -> ServerEvent:
    """An event judged again by its rules (one built with model_construct skipped them)."""
    if not isinstance(event, ServerEvent):
        raise InvalidTurnInput("a server event is given as a ServerEvent")
    return ServerEvent.model_validate(event.model_dump(warnings=False))


def verified_origin(kernel: Kernel, event: ServerEvent, signature: str | None) -> CommandOrigin:
    """Rule 1: the `CommandOrigin` of a verified event's commands, or `OriginNotVerified`."""
    origin = kernel.origins.get(event.origin)
    if origin is None or not origin.verify(event.signing_bytes(), signature):
        raise OriginNotVerified(_NOT_VERIFIED)
    return origin.command_origin(event)


async def run_server_event(
    kernel: Kernel, event: ServerEvent, origin: CommandOrigin
) -> AssistantTurn:
    """Rules 2-5 for a verified event, in a span of its own (`turnframe.server_event`); its
    stored reply."""
    with observe.span("server_event", origin=event.origin):
        try:
            turn = await _run(kernel, event, origin)
        except TurnframeError as error:
            observe.count("server_event.raised", code=error.code)
            raise
        observe.annotate(turn_id=turn.turn_id, status=turn.status.value)
        observe.count("server_event.completed", status=turn.status.value)
        return turn


async def _run(kernel: Kernel, event: ServerEvent, origin: CommandOrigin) -> AssistantTurn:
    account_id, conversation_id = event.account_id, event.conversation_id
    turn_id = event_turn_id(account_id, event.origin, event.idempotency_key)
    cause = f"event:{event.origin}:{event.content_digest()}"
    async with kernel.lock(account_id, conversation_id):
        # Keyed reads only (what a conversation's length does not change), in one read
        # transaction: an event commits as often as a click-only turn does.
        async with kernel.stores.snapshot() as view:
            conversations = view.conversations
            await conversations.get_conversation(account_id, conversation_id)  # NotFound
            began = await _began(view, account_id, turn_id)
            locale = event.locale or await conversation_locale(
                view, kernel.config.locales[0], account_id, conversation_id
            )
        if began:
            prior = await _prior(kernel, event, turn_id, cause)
            if prior is not None:
                return prior
        for _ in range(2):
            t = server_turn(kernel, account_id, conversation_id, turn_id, cause, locale)
            case = await _case(kernel, t, event)
            planned = _planned(t, event, case, origin)
            try:
                started = await accept_and_start(kernel, t, planned, [case])
                break
            except PreviousTurnUnfinished as previous:
                # Finished first (this event holds the conversation's lock), so its record
                # chains to one that stays; then the case is read again.
                await kernel.recovery().turn(account_id, previous.turn_id)
            except Conflict:
                # The key was used in another conversation (`IdempotencyKeyReused`), or another
                # process began the same event between the read and the write: its reply, or
                # `TurnInProgress` while that process still runs it.
                prior = await _prior(kernel, event, turn_id, cause, finish=False)
                if prior is not None:
                    return prior
                raise
        else:
            raise ConversationBusy(
                "the conversation's previous turn is unfinished and could not be finished"
            )
        return await commit_and_deliver(kernel, t, None, started, narrate=False)


async def conversation_locale(
    stores: Stores, default: str, account_id: str, conversation_id: str
) -> str:
    """The conversation's locale: its last user turn's among its last `_LOCALE_WINDOW` replies
    (read newest first, so usually two reads), else the last reply's (a server turn speaks the
    conversation's locale), else `default` (the first of `RuntimeConfig.locales`). A user turn
    without a reply (it failed) is not read."""
    conversations = stores.conversations
    recent = await conversations.recent_turns(account_id, conversation_id, _LOCALE_WINDOW)
    for reply in reversed(recent):
        said = await conversations.get_user_turn(account_id, reply.turn_id)
        if not said.input.is_server_turn:
            return said.input.locale
    return recent[-1].locale if recent else default


async def _began(stores: Stores, account_id: str, turn_id: str) -> bool:
    """Whether the event's turn was begun before (by this event or another with its key)."""
    try:
        await stores.conversations.get_user_turn(account_id, turn_id)
    except NotFound:
        return False
    return True


async def _prior(
    kernel: Kernel,
    event: ServerEvent,
    turn_id: str,
    cause: str,
    *,
    finish: bool = True,
) -> AssistantTurn | None:
    """The reply of the turn this event began before (None when it never began); with
    `finish`, an unfinished one is finished first once its marker is
    `RuntimeConfig.timer_lease_ms` old (rule 2), else it is `TurnInProgress`. The key with
    another event is `IdempotencyKeyReused`."""
    conversations = kernel.stores.conversations
    account_id = event.account_id
    try:
        stored = await conversations.get_user_turn(account_id, turn_id)
    except NotFound:
        return None
    if (
        stored.conversation_id != event.conversation_id
        or stored.input.origin_ref != f"{SERVER_TURN_ORIGIN}{cause}"
    ):
        raise IdempotencyKeyReused("this idempotency key was used before for another event")
    try:
        return await conversations.get_assistant_turn(account_id, turn_id)
    except NotFound:
        pass
    marker = await conversations.get_phase(account_id, turn_id)
    if marker.phase is TurnPhase.FAILED:  # it ended before any effect: a new key is needed
        record = await kernel.stores.replay.get(account_id, turn_id)
        raise TurnFailed("this event's turn failed before any effect", record.failure_code)
    if not finish or marker.updated_at > kernel.clock() - kernel.config.timer_lease_ms:
        raise TurnInProgress("this event's turn may still be running; send it again later")
    # Not running here (this holds the conversation's lock), and its marker has not moved for
    # a lease: no process runs it any more.
    await kernel.recovery().turn(account_id, turn_id)
    try:
        return await conversations.get_assistant_turn(account_id, turn_id)
    except NotFound:
        raise TurnInProgress("this event's turn could not be finished yet") from None


async def _case(kernel: Kernel, t: TurnState, event: ServerEvent) -> CaseInView:
    """Rule 3's read: the event's case as the turn sees it, or `NotFound`."""
    if event.workflow not in kernel.workflows:
        raise NotFound()
    case = await t.cases.load(CaseKey(workflow=event.workflow, case_id=event.case_id))
    if case is None:
        raise NotFound()
    return case


def _planned(t: TurnState, event: ServerEvent, case: CaseInView, origin: CommandOrigin) -> Planned:
    """Rules 3 and 4: the operation compiled by its workflow and judged by its policy."""
    offered = {spec.operation for spec in case.workflow.operations(case.view)}
    if event.operation not in offered:
        raise ServerEventRefused("the workflow does not offer this operation on the case now")
    act = ResolvedAct(
        act_id=_ACT,
        operation=event.operation,
        case_ref=case.case_ref,
        arguments=dict(event.arguments),
        evidence_digest=event.content_digest(),
    )
    compiled = case.workflow.compile(act, case.view, case.state)
    if isinstance(compiled, DomainRefusal):
        raise ServerEventRefused("the workflow refused the event's operation", compiled.code)
    plan = Plan()
    if not compiled:  # the case is so already: the turn says it changed nothing
        plan.act_results[_ACT] = ActResult.NO_CHANGE
        plan.unchanged.append((case.case_ref, event.operation))
    else:
        judge_commands(
            plan,
            _ACT,
            case,
            compiled,
            origin,
            account_id=t.ctx.account_id,
            turn_id=t.ctx.turn_id,
            constraints=frozenset(),
            cards=t.factory,
        )
    if plan.policy_refusals:
        code = plan.policy_refusals[0][1]
        raise ServerEventRefused("nothing could authorize the event's commands", code)
    t.audit.plan = plan
    t.audit.target_resolutions.append(
        TargetResolutionRecord(act_id=_ACT, resolution="exact", case_ref=case.case_ref)
    )
    raised = [
        RaisedCard(act_id, waiting.card, waiting.commands, deferrable=True)
        for act_id, waiting in plan.awaiting.items()
    ]
    return Planned(Understanding(), None, plan, raised, NOTHING, t.tell.report(plan))
