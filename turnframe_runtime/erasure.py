"""A subject's data, exported or erased (decision 0032).

Rules:
- A subject is a conversation of the account (`conv_…`): the library knows a person only
  through the conversations an adopter opened for them, so a person's data is erased or exported
  conversation by conversation.
- Another account's conversation and no conversation at all give the same `UnknownSubject`,
  word for word; a malformed id gives `InvalidSubject`. Neither reads further nor writes.
- Erasure runs turn by turn, each turn in one store transaction (`CommitStore.erase_turn`): a
  crash between two turns leaves whole turns erased and whole turns not, and erasing again
  finishes it. The audit verifies at every one of those points.
- A turn still running, a card's command not yet run, an outbox row not yet settled keep their
  words until they end; the report names them, and erasing again removes them.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import TypeAdapter, ValidationError

from turnframe_core import codes
from turnframe_core.erasure import ErasureReport, TurnErasure
from turnframe_core.ids import AccountId, ConversationId
from turnframe_runtime import observe
from turnframe_runtime.errors import InvalidSubject, UnknownSubject
from turnframe_store.bundle import Stores
from turnframe_store.errors import NotFound

__all__ = ["erase_expired", "erase_subject", "export_subject"]

_log = logging.getLogger("turnframe_runtime.erasure")
_ACCOUNT: TypeAdapter[str] = TypeAdapter(AccountId)
_SUBJECT: TypeAdapter[str] = TypeAdapter(ConversationId)
#: one message for an unknown subject, whoever holds it
_UNKNOWN = "the account holds no such subject"


async def _turn_ids(stores: Stores, account_id: str, subject: str) -> tuple[str, ...]:
    """The subject's turns, oldest first (`UnknownSubject` when the account holds none)."""
    for value, adapter in ((account_id, _ACCOUNT), (subject, _SUBJECT)):
        try:
            adapter.validate_python(value)
        except ValidationError:
            raise InvalidSubject("the account or subject is not a well-formed id") from None
    try:
        await stores.conversations.get_conversation(account_id, subject)
    except NotFound:
        raise UnknownSubject(_UNKNOWN) from None
    turns = await stores.conversations.list_turns(account_id, subject)
    records = await stores.replay.for_conversation(account_id, subject)
    # dict keys: the turns in order, each once (a record's turn is almost always among them)
    return tuple(dict.fromkeys([*(t.turn_id for t in turns), *(r.turn_id for r in records)]))


async def erase_subject(stores: Stores, account_id: str, subject: str, *, at: int) -> ErasureReport:
    """Erase every turn of `subject` the account holds (see the module's rules)."""
    erased: list[TurnErasure] = []
    for turn_id in await _turn_ids(stores, account_id, subject):
        try:
            erased.append(await stores.commits.erase_turn(account_id, turn_id))
        except NotFound:  # a turn received whose record is not written yet: still running
            erased.append(TurnErasure(turn_id=turn_id, erased=False, kept=("turn: still running",)))
    return ErasureReport(account_id=account_id, subject=subject, erased_at=at, turns=tuple(erased))


async def erase_expired(
    stores: Stores, retention_ms: int | None, *, now: int, limit: int
) -> tuple[TurnErasure, ...]:
    """The retention sweep: erase at most `limit` final turns recorded more than
    `retention_ms` ago whose words are not all erased yet, every account (turns never erased
    first, oldest first); each as `erase` erases it (one transaction per turn). A turn whose
    erasure fails is reported (`kept`: its code) and the others go on. Nothing without a
    retention."""
    if retention_ms is None:
        return ()
    expired = await stores.replay.unerased_before(now - retention_ms, limit)
    erased: list[TurnErasure] = []
    for account_id, turn_id in expired:
        try:
            erased.append(await stores.commits.erase_turn(account_id, turn_id))
        except NotFound:  # gone since it was listed
            continue
        except Exception as failure:  # one turn's failure never holds the others up
            observe.failure(_log, "erasure.retention_turn_failed", failure)
            kept = (f"failed: {codes.code_of(failure)}",)
            erased.append(TurnErasure(turn_id=turn_id, erased=False, kept=kept))
    return tuple(erased)


async def export_subject(
    stores: Stores, account_id: str, subject: str, *, at: int
) -> dict[str, Any]:
    """Everything the library stored of `subject`'s words and values, as JSON-ready data: each
    turn's input as received, what was understood and planned from it, the copy rendered, the
    reply as returned, the events it committed, the commands it admitted, the outbox rows and
    the cards it created. Read in one snapshot; writes nothing."""
    turns: list[dict[str, Any]] = []
    async with stores.snapshot() as view:
        turn_ids = await _turn_ids(view, account_id, subject)
        conversation = await view.conversations.get_conversation(account_id, subject)
        for turn_id in turn_ids:
            turns.append(await _export_turn(view, account_id, turn_id))
    return {
        "account_id": account_id,
        "subject": subject,
        "exported_at": at,
        "conversation": {"conversation_id": subject, "created_at": conversation.created_at},
        "turns": turns,
    }


async def _export_turn(stores: Stores, account_id: str, turn_id: str) -> dict[str, Any]:
    user_turn = await _maybe(stores.conversations.get_user_turn(account_id, turn_id))
    reply = await _maybe(stores.conversations.get_assistant_turn(account_id, turn_id))
    record = await _maybe(stores.replay.get(account_id, turn_id))
    commands = await stores.journal.for_turn(account_id, turn_id)
    cards = []
    for interaction_id in record.interactions_created if record is not None else ():
        card = await _maybe(stores.interactions.get(account_id, interaction_id))
        if card is not None:
            cards.append(
                {
                    "interaction_id": card.interaction_id,
                    "kind": card.kind.value,
                    "status": card.status.value,
                    "payload": card.payload.model_dump(mode="json"),
                    "resolved_option_id": card.resolved_option_id,
                }
            )
    event_ids = list(record.event_ids) if record is not None else []
    events = await stores.events.get_by_ids(account_id, event_ids) if event_ids else ()
    outbox = [
        row
        for outbox_id in (record.outbox_ids if record is not None else ())
        if (row := await _maybe(stores.outbox.get(outbox_id))) is not None
    ]
    return {
        "turn_id": turn_id,
        "received_at": user_turn.received_at if user_turn is not None else None,
        "input": user_turn.input.model_dump(mode="json") if user_turn is not None else None,
        "understanding": record.understanding if record is not None else None,
        "reduction_plan": record.reduction_plan if record is not None else None,
        "copy_renders": (
            [r.model_dump(mode="json") for r in record.copy_renders] if record is not None else []
        ),
        "events": [
            {"event_id": e.event_id, "event_type": e.event_type, "payload": e.payload}
            for e in events
        ],
        "outbox": [
            {"outbox_id": r.outbox_id, "destination": r.destination, "payload": r.payload}
            for r in outbox
        ],
        "reply": reply.model_dump(mode="json") if reply is not None else None,
        "commands": [
            {
                "command_id": entry.command_id,
                "command_type": entry.command_type,
                "payload": entry.payload,
                "status": entry.status.value,
            }
            for entry in commands
        ],
        "cards": cards,
        "erased_at": record.erased_at if record is not None else None,
    }


async def _maybe(call: Any) -> Any:
    try:
        return await call
    except NotFound:
        return None
