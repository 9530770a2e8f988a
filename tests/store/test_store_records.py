"""Store records: the journal's status machine, record consistency, bundle validation, the
error surface and the wire rules (snake_case keys, lowercase enum values)."""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

import turnframe_store
from turnframe_core import codes
from turnframe_core.cases import CaseRef
from turnframe_core.commands import CommandEnvelope, InternalPolicy
from turnframe_core.events import DomainEvent
from turnframe_core.replay import (
    AwaitingConfirmationOutcome,
    CommittedOutcome,
    FailedOutcome,
    IdempotentReplayOutcome,
    OutcomeUnknown,
    RejectedOutcome,
    RevisionConflictOutcome,
    TurnPhase,
)
from turnframe_core.turn import TurnInput
from turnframe_store import (
    CommitBundle,
    Conflict,
    Corrupt,
    InvalidRecord,
    JournalCompletion,
    JournalEntry,
    JournalStatus,
    NotFound,
    OutboxEntry,
    OutboxStatus,
    StoreError,
    Timeout,
    Unavailable,
    UserTurnRecord,
)

S = JournalStatus
SNAKE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")


def entry(**changes: Any) -> JournalEntry:
    envelope = CommandEnvelope.build(
        command_id="cmd_1",
        turn_id="turn_1",
        account_id="acct_a",
        case_ref=CaseRef(workflow="sample.case", case_id="c1", expected_revision=1),
        origin=InternalPolicy(policy_key="test"),
        command_type="sample.note",
    )
    return JournalEntry.from_envelope(envelope, now=1).model_copy(update=changes)


def event(event_id: str, account: str = "acct_a", sequence: int | None = None) -> DomainEvent:
    return DomainEvent(
        event_id=event_id,
        account_id=account,
        workflow="sample.case",
        case_id="c1",
        case_revision=1,
        command_id="cmd_1",
        event_type="sample.noted",
        occurred_at=1,
        sequence=sequence,
    )


def bundle(**items: Any) -> CommitBundle:
    return CommitBundle(account_id="acct_a", conversation_id="conv_1", turn_id="turn_1", **items)


# --- journal ------------------------------------------------------------------------------------

LEGAL_MOVES = {
    (S.PENDING, S.EXECUTING),
    (S.AWAITING_CONFIRMATION, S.EXECUTING),
    *{
        (source, target)
        for source in (S.PENDING, S.AWAITING_CONFIRMATION, S.EXECUTING)
        for target in (S.COMMITTED, S.FAILED, S.OUTCOME_UNKNOWN)
    },
    (S.OUTCOME_UNKNOWN, S.COMMITTED),
    (S.OUTCOME_UNKNOWN, S.FAILED),
}


@pytest.mark.parametrize("source", list(S))
def test_a_journal_entry_moves_only_along_the_status_machine(source: JournalStatus) -> None:
    allowed = {target for target in S if source.can_move_to(target)}

    assert allowed == {target for s, target in LEGAL_MOVES if s is source}


@pytest.mark.parametrize(
    ("outcome", "status"),
    [
        (CommittedOutcome(new_revision=2, event_ids=()), S.COMMITTED),
        (IdempotentReplayOutcome(new_revision=2, event_ids=()), S.COMMITTED),
        (RevisionConflictOutcome(current_revision=3), S.FAILED),
        (RejectedOutcome(code="sample.refused"), S.FAILED),
        (FailedOutcome(code="sample.failed"), S.FAILED),
        (OutcomeUnknown(attempt_id="attempt-1"), S.OUTCOME_UNKNOWN),
        (AwaitingConfirmationOutcome(interaction_id="int_1"), S.AWAITING_CONFIRMATION),
    ],
)
def test_each_outcome_settles_the_status_it_names(outcome: Any, status: JournalStatus) -> None:
    assert S.for_outcome(outcome) is status


def test_a_journal_entry_records_an_outcome_exactly_when_it_is_settled() -> None:
    with pytest.raises(ValidationError):
        JournalEntry.model_validate({**entry().model_dump(), "status": "committed"})
    with pytest.raises(ValidationError):
        JournalEntry.model_validate(
            {**entry().model_dump(), "outcome": {"kind": "failed", "code": "x.y"}}
        )

    settled = entry().settled(FailedOutcome(code="sample.failed"), at=5)

    assert JournalEntry.model_validate(settled.model_dump()) == settled


def test_a_reused_key_must_carry_the_same_command() -> None:
    assert entry().same_command(entry(command_id="cmd_2"))
    assert not entry().same_command(entry(payload={"other": 1}))


# --- other records ------------------------------------------------------------------------------


def test_an_outbox_row_carries_a_claim_exactly_while_it_is_dispatching() -> None:
    base = {
        "outbox_id": "obx_1",
        "command_id": "cmd_1",
        "destination": "sample.remote",
        "idempotency_key": "k",
        "created_at": 1,
    }
    with pytest.raises(ValidationError):
        OutboxEntry(**base, status=OutboxStatus.DISPATCHING)
    with pytest.raises(ValidationError):
        OutboxEntry(**base, claim_worker_id="w", claim_taken_at=1)
    with pytest.raises(ValidationError):
        OutboxEntry(**base, status=OutboxStatus.COMPLETED)

    claimed = OutboxEntry(
        **base, status=OutboxStatus.DISPATCHING, claim_worker_id="w", claim_taken_at=1
    )

    assert claimed.claim_worker_id == "w"


def test_a_user_turn_record_refuses_an_input_of_another_turn() -> None:
    with pytest.raises(ValidationError):
        UserTurnRecord(
            account_id="acct_a",
            conversation_id="conv_1",
            turn_id="turn_1",
            received_at=1,
            input=TurnInput(
                account_id="acct_a", conversation_id="conv_1", turn_id="turn_2", text="x"
            ),
        )


# --- bundle validation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("items", "problem"),
    [
        ({}, "the bundle writes nothing"),
        ({"events": (event("evt_1", account="acct_b"),)}, "an event belongs to another account"),
        ({"events": (event("evt_1", sequence=4),)}, "an event already has a sequence"),
        ({"events": (event("evt_1"), event("evt_1"))}, "an event id repeats"),
        (
            {
                "journal_completions": (
                    JournalCompletion(command_id="cmd_1", outcome=FailedOutcome(code="x.y")),
                    JournalCompletion(command_id="cmd_1", outcome=FailedOutcome(code="x.y")),
                )
            },
            "a command is completed twice",
        ),
        (
            {
                "journal_completions": (
                    JournalCompletion(
                        command_id="cmd_1",
                        outcome=AwaitingConfirmationOutcome(interaction_id="int_1"),
                    ),
                )
            },
            "a journal completion does not settle its command",
        ),
    ],
)
def test_a_bundle_names_the_problem_that_makes_it_invalid(
    items: dict[str, Any], problem: str
) -> None:
    invalid = bundle(**items)

    assert problem in invalid.problems()
    with pytest.raises(InvalidRecord, match=problem):
        invalid.require_valid()


def test_a_bundle_with_only_a_phase_is_valid() -> None:
    assert bundle(phase=TurnPhase.DELIVERED).problems() == ()


# --- errors -------------------------------------------------------------------------------------


def test_every_store_error_has_its_own_registered_code() -> None:
    errors = [StoreError, NotFound, Conflict, InvalidRecord, Timeout, Unavailable, Corrupt]
    found = [error.code for error in errors]

    assert len(set(found)) == len(found)
    assert all(code.startswith("turnframe.store.") and code in codes.ALL_CODES for code in found)
    assert issubclass(InvalidRecord, Conflict)


def test_not_found_never_says_what_was_missing() -> None:
    assert str(NotFound()) == "record not found"


# --- wire rules ---------------------------------------------------------------------------------


def store_models() -> list[type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}
    for name in ("records",):
        module = importlib.import_module(f"turnframe_store.{name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseModel) and obj.__module__ == module.__name__:
                found[obj.__qualname__] = obj
    return [found[key] for key in sorted(found)]


def key_problems(schema: Any, path: str = "$") -> list[str]:
    problems: list[str] = []
    if isinstance(schema, dict):
        for key in schema.get("properties", {}):
            if not SNAKE.match(key):
                problems.append(f"{path}.{key}")
        for value in schema.get("enum", []):
            if isinstance(value, str) and value != value.lower():
                problems.append(f"{path} enum {value}")
        for key, value in schema.items():
            problems.extend(key_problems(value, f"{path}/{key}"))
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            problems.extend(key_problems(value, f"{path}[{index}]"))
    return problems


@pytest.mark.parametrize("model", store_models(), ids=lambda m: m.__name__)
def test_store_records_use_snake_case_keys_and_lowercase_enum_values(
    model: type[BaseModel],
) -> None:
    assert key_problems(model.model_json_schema()) == []


def test_the_package_exports_exactly_its_public_api() -> None:
    exported = set(turnframe_store.__all__)

    assert all(hasattr(turnframe_store, name) for name in exported)
    assert not any(name.startswith("_") for name in exported)


def test_a_bundles_stream_entries_are_judged_once_and_a_changed_copy_afresh():
    """The commit check and the write share one serialization of a bundle's stream events; a
    copy with other events is judged again (so an invalid copy is still refused)."""
    from turnframe_core.stream import TurnFailed
    from turnframe_store.errors import InvalidRecord
    from turnframe_store.records import CommitBundle
    from turnframe_store.roles.commits import _stream_entries, bundle_keys

    failed = TurnFailed(turn_id="turn_1", sequence=1, at=1, code="x")
    bundle = CommitBundle(
        account_id="acct_1",
        conversation_id="conv_1",
        turn_id="turn_1",
        stream_events=(failed,),
    )
    bundle_keys(bundle)
    assert _stream_entries(bundle) is _stream_entries(bundle)
    assert [e.sequence for e in _stream_entries(bundle)] == [1]
    forged = bundle.model_copy(update={"stream_events": (failed, failed)})
    with pytest.raises(InvalidRecord):
        bundle_keys(forged)
