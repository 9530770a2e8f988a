"""Record builders: the store's records (and the core records it keeps) with every field but
the ones a caller names filled in. The conformance checks write these, and the test kit's
builders (`turnframe_test.builders`) build theirs with them. No domain words."""

from __future__ import annotations

from typing import Any, Final

from turnframe_core.blocks import AnswerBlock
from turnframe_core.cases import CaseRef
from turnframe_core.commands import CommandEnvelope, CommandOrigin, InternalPolicy
from turnframe_core.derive import derive_block_id, derive_replay_token
from turnframe_core.events import DomainEvent
from turnframe_core.interactions import (
    Interaction,
    InteractionKind,
    InteractionOption,
    InteractionPayload,
    ResolveClarification,
)
from turnframe_core.replay import ReplayRecord, TurnPhase
from turnframe_core.turn import AssistantTurn, TurnInput, TurnStatus
from turnframe_store.records import (
    JournalEntry,
    JournalStatus,
    OutboxEntry,
    TimerRecord,
    UserTurnRecord,
)

__all__ = [
    "ACCOUNT_A",
    "ACCOUNT_B",
    "DESTINATION",
    "FIRST_CASE",
    "T0",
    "WORKFLOW",
    "assistant_turn",
    "card",
    "case",
    "envelope",
    "event",
    "journal_entry",
    "outbox_row",
    "replay_record",
    "timer",
    "user_turn",
]

ACCOUNT_A: Final = "acct_a"
ACCOUNT_B: Final = "acct_b"
#: The time every builder stamps unless told otherwise (2023-11-14, in milliseconds).
T0: Final = 1_700_000_000_000
WORKFLOW: Final = "conformance.case"
DESTINATION: Final = "conformance.remote"


def case(case_id: str = "case-1", revision: int = 1, *, workflow: str = WORKFLOW) -> CaseRef:
    return CaseRef(workflow=workflow, case_id=case_id, expected_revision=revision)


#: The case a record is of unless it names another.
FIRST_CASE: Final = case()


def card(
    interaction_id: str,
    *,
    account: str = ACCOUNT_A,
    conversation: str = "conv_1",
    case: CaseRef | None = None,
    kind: InteractionKind = InteractionKind.SINGLE_SELECT,
    payload: InteractionPayload | None = None,
    created_at: int = T0,
    turn: str = "turn_1",
    title: str = "Pick one",
    **extra: Any,
) -> Interaction:
    """An active card; without a `payload`, a question titled `title` offering yes and no.
    `extra` goes to `Interaction.create` (blocking, revision_independent, expires_at, …)."""
    if payload is None:
        options = tuple(
            InteractionOption(
                option_id=f"opt_{key}",
                label=key.capitalize(),
                action=ResolveClarification(answer_key=key),
            )
            for key in ("yes", "no")
        )
        payload = InteractionPayload(title=title, options=options)
    return Interaction.create(
        interaction_id=interaction_id,
        account_id=account,
        conversation_id=conversation,
        case_ref=case or FIRST_CASE,
        kind=kind,
        payload=payload,
        created_by_turn=turn,
        created_at=created_at,
        **extra,
    )


def envelope(
    command_id: str,
    *,
    account: str = ACCOUNT_A,
    turn: str = "turn_1",
    case: CaseRef | None = None,
    origin: CommandOrigin | None = None,
    command_type: str = "conformance.note",
    payload: dict[str, Any] | None = None,
) -> CommandEnvelope:
    return CommandEnvelope.build(
        command_id=command_id,
        turn_id=turn,
        account_id=account,
        case_ref=case or FIRST_CASE,
        origin=origin or InternalPolicy(policy_key="conformance"),
        command_type=command_type,
        payload=payload if payload is not None else {"note": command_id},
    )


def journal_entry(
    command_id: str,
    *,
    account: str = ACCOUNT_A,
    turn: str = "turn_1",
    case: CaseRef | None = None,
    payload: dict[str, Any] | None = None,
    created_at: int = T0,
    status: JournalStatus = JournalStatus.PENDING,
) -> JournalEntry:
    command = envelope(command_id, account=account, turn=turn, case=case, payload=payload)
    return JournalEntry.from_envelope(command, now=created_at, status=status)


def event(
    event_id: str,
    *,
    account: str = ACCOUNT_A,
    workflow: str = WORKFLOW,
    case_id: str = "case-1",
    revision: int = 1,
    command: str = "cmd_1",
    event_type: str = "conformance.noted",
    occurred_at: int = T0,
    payload: dict[str, Any] | None = None,
) -> DomainEvent:
    return DomainEvent(
        event_id=event_id,
        account_id=account,
        workflow=workflow,
        case_id=case_id,
        case_revision=revision,
        command_id=command,
        event_type=event_type,
        payload=payload if payload is not None else {"event": event_id, "text": "naïve café"},
        occurred_at=occurred_at,
    )


def user_turn(
    turn: str,
    *,
    account: str = ACCOUNT_A,
    conversation: str = "conv_1",
    received_at: int = T0,
    text: str = "hello",
) -> UserTurnRecord:
    return UserTurnRecord(
        account_id=account,
        conversation_id=conversation,
        turn_id=turn,
        received_at=received_at,
        input=TurnInput(account_id=account, conversation_id=conversation, turn_id=turn, text=text),
    )


def assistant_turn(
    turn: str,
    *,
    account: str = ACCOUNT_A,
    conversation: str = "conv_1",
    text: str = "Già fatto — «done», 100 %.",
) -> AssistantTurn:
    """A completed turn answering `text` (in Italian: the text is not ASCII)."""
    started = AssistantTurn.begin(
        turn_id=turn, conversation_id=conversation, account_id=account, locale="it", created_at=T0
    )
    answer = AnswerBlock(block_id=derive_block_id(account, turn, "answer:q1"), text=text)
    return started.finish(TurnStatus.COMPLETED, at=T0 + 5, blocks=(answer,))


def outbox_row(
    outbox_id: str,
    *,
    command: str = "cmd_1",
    key: str | None = None,
    destination: str = DESTINATION,
    created_at: int = T0,
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


def replay_record(
    turn: str,
    *,
    account: str = ACCOUNT_A,
    conversation: str = "conv_1",
    phase: TurnPhase = TurnPhase.RECEIVED,
    recorded_at: int = T0,
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


def timer(
    timer_id: str,
    *,
    account: str = ACCOUNT_A,
    conversation: str = "conv_1",
    due_at: int = T0,
    event: str | None = None,
    created_at: int = T0,
) -> TimerRecord:
    """A pending timer; without an `event`, a small canonical JSON object naming the timer."""
    return TimerRecord(
        account_id=account,
        conversation_id=conversation,
        timer_id=timer_id,
        due_at=due_at,
        event=event if event is not None else f'{{"timer":"{timer_id}"}}',
        created_at=created_at,
    )
