"""The invariants a conversation keeps after any crash and its recovery, read through the store
protocols (so they hold on any store): every turn ended and its reply is stored; each receipt
cites committed events; every event a turn committed is cited by a receipt of that turn's reply,
and no turn that committed anything ended `interrupted`; each card a reply shows is stored; no
card is left resolving; a card is resolved exactly when a command from it committed; the audit
chain verifies."""

from __future__ import annotations

from turnframe_core import (
    CaseKey,
    InteractionBlock,
    InteractionStatus,
    ReceiptBlock,
    TurnPhase,
    TurnStatus,
)
from turnframe_core.events import DomainEvent
from turnframe_store import JournalEntry, JournalStatus, NotFound
from turnframe_store.bundle import Stores
from turnframe_test.audit_kit import audit_problems

__all__ = ["conversation_violations", "resolution_runs_commands", "unreceipted_events"]


async def conversation_violations(
    stores: Stores, account_id: str, conversation_id: str
) -> list[str]:
    """Every invariant the conversation breaks, one line each (empty: it keeps them all)."""
    found: list[str] = []
    entries: list[JournalEntry] = []
    cases: set[CaseKey] = set()
    for record in await stores.conversations.list_turns(account_id, conversation_id):
        entries.extend(await stores.journal.for_turn(account_id, record.turn_id))
        marker = await stores.conversations.get_phase(account_id, record.turn_id)
        if marker.phase not in (TurnPhase.DELIVERED, TurnPhase.FAILED):
            found.append(f"{record.turn_id} left {marker.phase.value}")
        try:
            turn = await stores.conversations.get_assistant_turn(account_id, record.turn_id)
        except NotFound:
            if marker.phase is not TurnPhase.FAILED:
                found.append(f"{record.turn_id} ended {marker.phase.value} with no reply")
            continue
        if turn.status not in (TurnStatus.COMPLETED, TurnStatus.INTERRUPTED):
            found.append(f"{record.turn_id} is {turn.status.value}")
        for block in turn.blocks:
            if isinstance(block, ReceiptBlock):
                cited = await stores.events.get_by_ids(account_id, block.event_ids)
                if len(cited) != len(set(block.event_ids)):
                    found.append(f"{record.turn_id}'s receipt cites an event not committed")
            elif isinstance(block, InteractionBlock):
                try:
                    card = await stores.interactions.get(account_id, block.interaction_id)
                    cases.add(card.case_ref.key)
                except NotFound:
                    found.append(f"{record.turn_id} shows a card never stored")
    for entry in entries:
        cases.add(entry.case_ref.key)
    committed = {
        getattr(e.origin, "interaction_id", None)
        for e in entries
        if e.status is JournalStatus.COMMITTED
    }
    for case in cases:
        for card in await stores.interactions.for_case(account_id, case):
            if card.conversation_id != conversation_id:
                continue
            if card.status is InteractionStatus.RESOLVING:
                found.append(f"{card.interaction_id} left resolving")
            elif card.status is InteractionStatus.RESOLVED and card.interaction_id not in committed:
                if resolution_runs_commands(card):
                    found.append(f"{card.interaction_id} resolved with nothing committed")
            elif card.status is InteractionStatus.ACTIVE and card.interaction_id in committed:
                found.append(f"{card.interaction_id} open after its command ran")
    found += await unreceipted_events(stores, account_id, conversation_id)
    found += (await audit_problems(stores, account_id, conversation_id))[1]
    return found


#: the most events read per case (a test conversation holds far fewer)
_CASE_EVENTS = 100_000


async def unreceipted_events(stores: Stores, account_id: str, conversation_id: str) -> list[str]:
    """Every domain event a command of the conversation committed is named by the record of the
    turn that committed it (a reconciled command's, by the follow-up turn that told of it), and
    that turn's stored reply cites it in a receipt: so no turn whose commit landed ends
    `interrupted`. One line per breach (empty: every committed event has its receipt)."""
    commands: set[str] = set()
    cases: set[CaseKey] = set()
    turn_ids = [
        t.turn_id for t in await stores.conversations.list_turns(account_id, conversation_id)
    ]
    for turn_id in turn_ids:
        for entry in await stores.journal.for_turn(account_id, turn_id):
            commands.add(entry.command_id)
            cases.add(entry.case_ref.key)
    committed: list[DomainEvent] = [
        event
        for case in sorted(cases, key=str)
        for event in await stores.events.list_for_case(account_id, case, 0, _CASE_EVENTS)
        if event.command_id in commands
    ]
    named: dict[str, list[str]] = {}
    for record in await stores.replay.for_conversation(account_id, conversation_id):
        for event_id in record.event_ids:
            named.setdefault(event_id, []).append(record.turn_id)
    cited: dict[str, set[str] | None] = {}
    status: dict[str, TurnStatus] = {}
    for turn_id in turn_ids:
        try:
            reply = await stores.conversations.get_assistant_turn(account_id, turn_id)
        except NotFound:
            cited[turn_id] = None
            continue
        status[turn_id] = reply.status
        cited[turn_id] = {
            event_id
            for block in reply.blocks
            if isinstance(block, ReceiptBlock)
            for event_id in block.event_ids
        }
    found: list[str] = []
    for event in committed:
        what = f"{event.event_id} ({event.event_type})"
        owners = named.get(event.event_id, [])
        if not owners:
            found.append(f"{what} was committed and no turn's record names it")
        for owner in owners:
            receipts = cited.get(owner)
            if receipts is None:
                found.append(f"{owner} committed {what} and has no reply")
            elif status.get(owner) is TurnStatus.INTERRUPTED:
                found.append(f"{owner} committed {what} and ended interrupted")
            elif event.event_id not in receipts:
                found.append(f"{owner} committed {what} and no receipt of its reply cites it")
    return found


def resolution_runs_commands(card: object) -> bool:
    """Whether the option the card was resolved with runs commands: confirming them or applying
    an operation (a decline, a dismissal or a choice of case runs none of its own)."""
    option_id = getattr(card, "resolved_option_id", None)
    payload = getattr(card, "payload", None)
    for option in getattr(payload, "options", ()):
        if option.option_id == option_id:
            return getattr(option.action, "kind", "") in ("confirm_commands", "apply_operation")
    return True
