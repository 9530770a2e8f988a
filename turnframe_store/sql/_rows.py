"""Records to statement parameters and rows back to records (internal).

A document column holds canonical JSON of the record as first written; a read overlays the
lifecycle columns on it and validates the result, so a row that no longer reads back as a record
raises `Corrupt` instead of returning something half-right.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

from pydantic import TypeAdapter, ValidationError

from turnframe_core.audit_chain import ChainLink
from turnframe_core.blocks import STORED_CONTEXT
from turnframe_core.canonical import CanonicalJsonError, canonical_json
from turnframe_core.errors import TurnframeError
from turnframe_core.events import DomainEvent
from turnframe_core.interactions import Interaction, InteractionStatus
from turnframe_core.replay import CommandOutcome, ReplayRecord
from turnframe_core.turn import TurnInput
from turnframe_store.errors import Corrupt, InvalidRecord
from turnframe_store.records import (
    ConversationRecord,
    JournalEntry,
    OutboxEntry,
    PhaseMarker,
    TimerRecord,
    UserTurnRecord,
)

__all__ = ["Codec", "JOURNAL_LIFECYCLE", "document", "event_id_list"]

Row = Mapping[str, Any]
T = TypeVar("T")

JOURNAL_LIFECYCLE: Final = frozenset({"status", "outcome", "completed_at"})

_OUTCOME: Final[TypeAdapter[CommandOutcome]] = TypeAdapter(CommandOutcome)


def document(value: Any) -> str:
    """The canonical JSON text a document column stores."""
    try:
        return canonical_json(value)
    except CanonicalJsonError:
        raise InvalidRecord("the record has no canonical JSON form") from None


@functools.lru_cache(maxsize=4096)
def _created_card(document: str) -> Interaction:
    """A stored card document, validated; cached, since a card's document never changes."""
    return Interaction.model_validate_json(document)


def _reading(what: str, read: Callable[[], T]) -> T:
    try:
        return read()
    except (ValidationError, ValueError, TypeError, KeyError, TurnframeError):
        raise Corrupt(f"a stored {what} does not read back") from None


class Codec:
    """Maps records to parameters and rows to records, with the backend's time representation."""

    def __init__(self, time_in: Callable[[int], Any], time_out: Callable[[Any], int]) -> None:
        self.time_in = time_in
        self.time_out = time_out

    def _opt_time_in(self, ms: int | None) -> Any:
        return None if ms is None else self.time_in(ms)

    def _opt_time_out(self, value: Any) -> int | None:
        return None if value is None else self.time_out(value)

    # --- conversations and turns ----------------------------------------------------------------

    def conversation(self, row: Row) -> ConversationRecord:
        return _reading(
            "conversation",
            lambda: ConversationRecord(
                account_id=row["account_id"],
                conversation_id=row["conversation_id"],
                created_at=self.time_out(row["created_at"]),
            ),
        )

    def user_turn(self, row: Row) -> UserTurnRecord:
        return _reading(
            "user turn",
            lambda: UserTurnRecord(
                account_id=row["account_id"],
                conversation_id=row["conversation_id"],
                turn_id=row["turn_id"],
                received_at=self.time_out(row["received_at"]),
                input=TurnInput.model_validate_json(row["user_input"], context=STORED_CONTEXT),
            ),
        )

    def user_turn_params(self, record: UserTurnRecord) -> dict[str, Any]:
        return {
            "account_id": record.account_id,
            "turn_id": record.turn_id,
            "conversation_id": record.conversation_id,
            "received_at": self.time_in(record.received_at),
            "user_input": document(record.input),
        }

    def marker(self, row: Row) -> PhaseMarker:
        return _reading(
            "phase marker",
            lambda: PhaseMarker(
                account_id=row["account_id"],
                conversation_id=row["conversation_id"],
                turn_id=row["turn_id"],
                phase=row["phase"],
                updated_at=self.time_out(row["updated_at"]),
            ),
        )

    # --- interactions ---------------------------------------------------------------------------

    def card(self, row: Row) -> Interaction:
        def read() -> Interaction:
            # The card as created is validated (its payload against its hash) once per stored
            # document; the lifecycle columns are checked on every read.
            created = _created_card(row["interaction"])
            option = row["resolved_option_id"]
            if option is not None and not isinstance(option, str):
                raise TypeError("resolved_option_id")
            events = json.loads(row["resolution_event_ids"])
            if not isinstance(events, list) or not all(isinstance(e, str) for e in events):
                raise TypeError("resolution_event_ids")
            return created.model_copy(
                update={
                    "status": InteractionStatus(row["status"]),
                    "resolved_at": self._opt_time_out(row["resolved_at"]),
                    "resolved_option_id": option,
                    "resolution_event_ids": tuple(events),
                }
            )

        return _reading("card", read)

    def cards(self, rows: Sequence[Row]) -> tuple[Interaction, ...]:
        return tuple(self.card(row) for row in rows)

    def card_params(self, card: Interaction) -> dict[str, Any]:
        return {
            "account_id": card.account_id,
            "interaction_id": card.interaction_id,
            "conversation_id": card.conversation_id,
            "workflow": card.case_ref.workflow,
            "case_id": card.case_ref.case_id,
            "case_revision": card.case_ref.expected_revision,
            "blocking": card.blocking,
            "revision_independent": card.revision_independent,
            "interaction": document(card),
            "status": card.status.value,
            "created_at": self.time_in(card.created_at),
            "expires_at": self._opt_time_in(card.expires_at),
            "resolved_at": self._opt_time_in(card.resolved_at),
            "resolved_option_id": card.resolved_option_id,
            "resolution_event_ids": event_id_list(card.resolution_event_ids),
        }

    # --- command journal ------------------------------------------------------------------------

    def entry(self, row: Row) -> JournalEntry:
        def read() -> JournalEntry:
            data = json.loads(row["entry"])
            outcome = row["outcome"]
            data.update(
                status=row["status"],
                outcome=None if outcome is None else json.loads(outcome),
                completed_at=self._opt_time_out(row["completed_at"]),
            )
            return JournalEntry.model_validate(data)

        return _reading("journal entry", read)

    def entries(self, rows: Sequence[Row]) -> tuple[JournalEntry, ...]:
        return tuple(self.entry(row) for row in rows)

    def entry_params(self, entry: JournalEntry) -> dict[str, Any]:
        return {
            "account_id": entry.account_id,
            "command_id": entry.command_id,
            "idempotency_key": entry.idempotency_key,
            "turn_id": entry.turn_id,
            "workflow": entry.case_ref.workflow,
            "case_id": entry.case_ref.case_id,
            "expected_revision": entry.case_ref.expected_revision,
            "command_type": entry.command_type,
            "entry": document(entry.model_dump(mode="json", exclude=set(JOURNAL_LIFECYCLE))),
            "status": entry.status.value,
            "created_at": self.time_in(entry.created_at),
        }

    @staticmethod
    def outcome(outcome: CommandOutcome) -> str:
        return document(_OUTCOME.dump_python(outcome, mode="json"))

    # --- events ---------------------------------------------------------------------------------

    def event(self, row: Row) -> DomainEvent:
        return _reading(
            "event",
            lambda: DomainEvent(
                event_id=row["event_id"],
                account_id=row["account_id"],
                workflow=row["workflow"],
                case_id=row["case_id"],
                case_revision=row["case_revision"],
                command_id=row["command_id"],
                event_type=row["event_type"],
                payload=json.loads(row["payload"]),
                occurred_at=self.time_out(row["occurred_at"]),
                # a provisional sequence (negative) is no sequence yet: see `_events`
                sequence=row["sequence"] if row["sequence"] > 0 else None,
            ),
        )

    def events(self, rows: Sequence[Row]) -> tuple[DomainEvent, ...]:
        return tuple(self.event(row) for row in rows)

    def event_params(self, event: DomainEvent) -> dict[str, Any]:
        return {
            "account_id": event.account_id,
            "event_id": event.event_id,
            "workflow": event.workflow,
            "case_id": event.case_id,
            "case_revision": event.case_revision,
            "command_id": event.command_id,
            "event_type": event.event_type,
            "payload": document(event.payload),
            "occurred_at": self.time_in(event.occurred_at),
        }

    # --- outbox ---------------------------------------------------------------------------------

    def outbox(self, row: Row) -> OutboxEntry:
        return _reading(
            "outbox row",
            lambda: OutboxEntry(
                outbox_id=row["outbox_id"],
                command_id=row["command_id"],
                destination=row["destination"],
                payload=json.loads(row["payload"]),
                idempotency_key=row["idempotency_key"],
                status=row["status"],
                attempt_count=row["attempt_count"],
                next_attempt_at=self._opt_time_out(row["next_attempt_at"]),
                created_at=self.time_out(row["created_at"]),
                completed_at=self._opt_time_out(row["completed_at"]),
                claim_worker_id=row["claim_worker_id"],
                claim_taken_at=self._opt_time_out(row["claim_taken_at"]),
                dispatch_started_at=self._opt_time_out(row["dispatch_started_at"]),
                last_failure=row["last_failure"],
                remote_ref=row["remote_ref"],
            ),
        )

    def outbox_rows(self, rows: Sequence[Row]) -> tuple[OutboxEntry, ...]:
        return tuple(self.outbox(row) for row in rows)

    def outbox_params(self, entry: OutboxEntry) -> dict[str, Any]:
        return {
            "outbox_id": entry.outbox_id,
            "command_id": entry.command_id,
            "destination": entry.destination,
            "payload": document(entry.payload),
            "idempotency_key": entry.idempotency_key,
            "status": entry.status.value,
            "attempt_count": entry.attempt_count,
            "next_attempt_at": self._opt_time_in(entry.next_attempt_at),
            "created_at": self.time_in(entry.created_at),
            "completed_at": self._opt_time_in(entry.completed_at),
            "claim_worker_id": entry.claim_worker_id,
            "claim_taken_at": self._opt_time_in(entry.claim_taken_at),
            "dispatch_started_at": self._opt_time_in(entry.dispatch_started_at),
            "last_failure": entry.last_failure,
            "remote_ref": entry.remote_ref,
        }

    # --- replay records -------------------------------------------------------------------------

    @staticmethod
    def replay(row: Row) -> ReplayRecord:
        return _reading(
            "replay record",
            lambda: ReplayRecord.model_validate_json(row["record"], context=STORED_CONTEXT),
        )

    @staticmethod
    def link(row: Row) -> ChainLink:
        return _reading(
            "audit link",
            lambda: ChainLink(
                account_id=row["account_id"],
                conversation_id=row["conversation_id"],
                position=row["position"],
                turn_id=row["turn_id"],
                record_digest=row["record_digest"],
                previous=row["previous_digest"],
                linked_at=row["linked_at"],
                link_digest=row["link_digest"],
            ),
        )

    @staticmethod
    def link_params(link: ChainLink) -> dict[str, Any]:
        return {
            "account_id": link.account_id,
            "conversation_id": link.conversation_id,
            "position": link.position,
            "turn_id": link.turn_id,
            "record_digest": link.record_digest,
            "previous_digest": link.previous,
            "linked_at": link.linked_at,
            "link_digest": link.link_digest,
        }

    def replay_params(self, record: ReplayRecord, text: str) -> dict[str, Any]:
        recorded_at = self.time_in(record.recorded_at)
        return {
            "account_id": record.account_id,
            "turn_id": record.turn_id,
            "conversation_id": record.conversation_id,
            "replay_token": record.replay_token,
            "phase": record.phase.value,
            "first_recorded_at": recorded_at,
            "recorded_at": recorded_at,
            "record": text,
        }

    # --- timers ---------------------------------------------------------------------------------

    def timer(self, row: Row) -> TimerRecord:
        return _reading(
            "timer",
            lambda: TimerRecord(
                account_id=row["account_id"],
                conversation_id=row["conversation_id"],
                timer_id=row["timer_id"],
                due_at=self.time_out(row["due_at"]),
                event=row["event"],
                status=row["status"],
                worker_id=row["worker_id"],
                claimed_at=self._opt_time_out(row["claimed_at"]),
                fired_at=self._opt_time_out(row["fired_at"]),
                created_at=self.time_out(row["created_at"]),
            ),
        )

    def timer_params(self, record: TimerRecord) -> dict[str, Any]:
        return {
            "account_id": record.account_id,
            "timer_id": record.timer_id,
            "conversation_id": record.conversation_id,
            "due_at": self.time_in(record.due_at),
            "event": record.event,
            "status": record.status.value,
            "worker_id": record.worker_id,
            "claimed_at": self._opt_time_in(record.claimed_at),
            "fired_at": self._opt_time_in(record.fired_at),
            "created_at": self.time_in(record.created_at),
        }


def event_id_list(event_ids: Sequence[str]) -> str:
    """A list of ids as the JSON text a list column (or a `json_each` bind) takes."""
    return json.dumps(list(event_ids), separators=(",", ":"))
