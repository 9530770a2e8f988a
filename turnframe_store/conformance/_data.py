"""The records the checks write (no domain words; internal)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from turnframe_core.blocks import AnswerBlock
from turnframe_core.cases import CaseRef
from turnframe_core.commands import CommandEnvelope, InternalPolicy
from turnframe_core.derive import derive_block_id, derive_replay_token
from turnframe_core.events import DomainEvent
from turnframe_core.interactions import (
    Interaction,
    InteractionKind,
    InteractionOption,
    InteractionPayload,
    InteractionStatus,
    ResolveClarification,
)
from turnframe_core.replay import ReplayRecord, TurnPhase
from turnframe_core.turn import AssistantTurn, TurnInput, TurnStatus
from turnframe_store.bundle import Stores
from turnframe_store.records import JournalEntry, JournalStatus, OutboxEntry, UserTurnRecord

_A: Final = "acct_a"
_B: Final = "acct_b"
_T0: Final = 1_700_000_000_000
_WORKFLOW: Final = "conformance.case"
_DESTINATION: Final = "conformance.remote"
_CARD_LIFECYCLE: Final = {"status", "resolved_at", "resolved_option_id", "resolution_event_ids"}


def _case(case_id: str = "case-1", revision: int = 1) -> CaseRef:
    return CaseRef(workflow=_WORKFLOW, case_id=case_id, expected_revision=revision)


def _card(
    interaction_id: str,
    *,
    account: str = _A,
    conversation: str = "conv_1",
    case: CaseRef | None = None,
    blocking: bool = True,
    revision_independent: bool = False,
    created_at: int = _T0,
    expires_at: int | None = None,
    turn: str = "turn_1",
    title: str = "Pick one",
) -> Interaction:
    options = tuple(
        InteractionOption(
            option_id=f"opt_{key}",
            label=key.capitalize(),
            action=ResolveClarification(answer_key=key),
        )
        for key in ("yes", "no")
    )
    return Interaction.create(
        interaction_id=interaction_id,
        account_id=account,
        conversation_id=conversation,
        case_ref=case or _case(),
        kind=InteractionKind.SINGLE_SELECT,
        payload=InteractionPayload(title=title, options=options),
        created_by_turn=turn,
        created_at=created_at,
        blocking=blocking,
        revision_independent=revision_independent,
        expires_at=expires_at,
    )


def _entry(
    command_id: str,
    *,
    account: str = _A,
    turn: str = "turn_1",
    case: CaseRef | None = None,
    payload: dict[str, Any] | None = None,
    created_at: int = _T0,
    status: JournalStatus = JournalStatus.PENDING,
) -> JournalEntry:
    envelope = CommandEnvelope.build(
        command_id=command_id,
        turn_id=turn,
        account_id=account,
        case_ref=case or _case(),
        origin=InternalPolicy(policy_key="conformance"),
        command_type="conformance.note",
        payload=payload if payload is not None else {"note": command_id},
    )
    return JournalEntry.from_envelope(envelope, now=created_at, status=status)


def _event(
    event_id: str,
    *,
    account: str = _A,
    case_id: str = "case-1",
    revision: int = 1,
    command: str = "cmd_1",
) -> DomainEvent:
    return DomainEvent(
        event_id=event_id,
        account_id=account,
        workflow=_WORKFLOW,
        case_id=case_id,
        case_revision=revision,
        command_id=command,
        event_type="conformance.noted",
        payload={"event": event_id, "text": "naïve café"},
        occurred_at=_T0,
    )


def _user_turn(
    turn: str,
    *,
    account: str = _A,
    conversation: str = "conv_1",
    received_at: int = _T0,
    text: str = "hello",
) -> UserTurnRecord:
    return UserTurnRecord(
        account_id=account,
        conversation_id=conversation,
        turn_id=turn,
        received_at=received_at,
        input=TurnInput(account_id=account, conversation_id=conversation, turn_id=turn, text=text),
    )


async def _start_turn(
    stores: Stores, turn: str, *, account: str = _A, conversation: str = "conv_1"
) -> None:
    await stores.conversations.ensure_conversation(account, conversation)
    await stores.conversations.append_user_turn(
        _user_turn(turn, account=account, conversation=conversation)
    )


def _assistant_turn(
    turn: str,
    *,
    account: str = _A,
    conversation: str = "conv_1",
    text: str = "Già fatto — «done», 100 %.",
) -> AssistantTurn:
    started = AssistantTurn.begin(
        turn_id=turn, conversation_id=conversation, account_id=account, locale="it", created_at=_T0
    )
    answer = AnswerBlock(block_id=derive_block_id(account, turn, "answer:q1"), text=text)
    return started.finish(TurnStatus.COMPLETED, at=_T0 + 5, blocks=(answer,))


def _outbox_row(
    outbox_id: str,
    *,
    command: str = "cmd_1",
    key: str | None = None,
    destination: str = _DESTINATION,
    created_at: int = _T0,
    next_attempt_at: int | None = None,
) -> OutboxEntry:
    return OutboxEntry(
        outbox_id=outbox_id,
        command_id=command,
        destination=destination,
        payload={"row": outbox_id},
        idempotency_key=key or f"key-{outbox_id}",
        created_at=created_at,
        next_attempt_at=next_attempt_at,
    )


def _replay(
    turn: str,
    *,
    account: str = _A,
    conversation: str = "conv_1",
    phase: TurnPhase = TurnPhase.RECEIVED,
    recorded_at: int = _T0,
) -> ReplayRecord:
    return ReplayRecord(
        turn_id=turn,
        conversation_id=conversation,
        account_id=account,
        replay_token=derive_replay_token(turn),
        phase=phase,
        recorded_at=recorded_at,
        input=TurnInput(account_id=account, conversation_id=conversation, turn_id=turn, text="hi"),
    )


def _ids(records: Iterable[Any], field: str) -> list[str]:
    return [getattr(record, field) for record in records]


async def _status(stores: Stores, account: str, interaction_id: str) -> InteractionStatus:
    return (await stores.interactions.get(account, interaction_id)).status
