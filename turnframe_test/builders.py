"""Small builders for core records, so tests state only what matters to them (the store's record
builders, `turnframe_store.builders`, with the kit's defaults)."""

from __future__ import annotations

from typing import Any

from turnframe_core import (
    CaseRef,
    CommandEnvelope,
    CommandOrigin,
    ConfirmCommands,
    CopyRef,
    DeclineCommands,
    DirectSafeUserAct,
    DomainEvent,
    Interaction,
    InteractionKind,
    InteractionOption,
    InteractionPayload,
    ReceiptBlock,
    digest,
)
from turnframe_core.derive import derive_block_id, derive_receipt_id
from turnframe_store import builders as store_builders

__all__ = ["card_payload", "case", "confirm_card", "copy_ref", "envelope", "event", "receipt_block"]


def copy_ref(template_id: str = "test.template", locale: str = "en") -> CopyRef:
    return CopyRef(
        template_id=template_id,
        template_version="1",
        locale=locale,
        catalog_digest=digest({"catalog": locale}),
    )


def receipt_block(
    event_ids: tuple[str, ...] = ("evt_1",),
    status_code: str = "test.done",
    turn_id: str = "turn_1",
    account_id: str = "acct_1",
) -> ReceiptBlock:
    receipt_id = derive_receipt_id(status_code, event_ids)
    return ReceiptBlock(
        block_id=derive_block_id(account_id, turn_id, f"receipt:{receipt_id}"),
        receipt_id=receipt_id,
        event_ids=event_ids,
        status_code=status_code,
        title="Done",
        copy_ref=copy_ref(),
    )


def case(workflow: str = "ledger", case_id: str = "c1", revision: int = 1) -> CaseRef:
    return store_builders.case(case_id, revision, workflow=workflow)


def card_payload(command_id: str = "cmd_1", title: str = "Confirm?") -> InteractionPayload:
    return InteractionPayload(
        title=title,
        options=(
            InteractionOption(
                option_id="opt_confirm",
                label="Confirm",
                action=ConfirmCommands(command_ids=(command_id,)),
            ),
            InteractionOption(option_id="opt_decline", label="Keep", action=DeclineCommands()),
        ),
    )


def confirm_card(
    *,
    interaction_id: str = "int_1",
    account_id: str = "acct_1",
    conversation_id: str = "conv_1",
    case_ref: CaseRef | None = None,
    created_at: int = 1_000,
    **extra: Any,
) -> Interaction:
    return store_builders.card(
        interaction_id,
        account=account_id,
        conversation=conversation_id,
        case=case_ref or case(),
        kind=InteractionKind.CONFIRM_COMMAND,
        payload=card_payload(),
        created_at=created_at,
        **extra,
    )


def envelope(
    *,
    command_id: str = "cmd_1",
    turn_id: str = "turn_1",
    account_id: str = "acct_1",
    case_ref: CaseRef | None = None,
    origin: CommandOrigin | None = None,
    command_type: str = "ledger.set_note",
    payload: dict[str, Any] | None = None,
) -> CommandEnvelope:
    return store_builders.envelope(
        command_id,
        account=account_id,
        turn=turn_id,
        case=case_ref or case(),
        origin=origin or DirectSafeUserAct(evidence_digest=digest("set the note")),
        command_type=command_type,
        payload=payload if payload is not None else {"note": "x"},
    )


def event(
    event_id: str = "evt_1",
    *,
    account_id: str = "acct_1",
    case_ref: CaseRef | None = None,
    command_id: str = "cmd_1",
    event_type: str = "ledger.note_set",
    occurred_at: int = 2_000,
    payload: dict[str, Any] | None = None,
) -> DomainEvent:
    ref = case_ref or case()
    return store_builders.event(
        event_id,
        account=account_id,
        workflow=ref.workflow,
        case_id=ref.case_id,
        revision=ref.expected_revision + 1,
        command=command_id,
        event_type=event_type,
        occurred_at=occurred_at,
        payload=payload or {},
    )
