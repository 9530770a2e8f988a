"""Erasing one turn's stored words (decision 0032): the policy, stated once; each store reads the
turn's documents and writes what `plan_erasure` gives, in one transaction.

Rules:
- Only a final turn is erased (its record `delivered` or `failed`): a turn still running keeps its
  words until it ends, and erasing again then removes them.
- What erasure writes: the user turn's input, the stored reply's blocks, the replay record's
  personal fields (their digests kept), the payload of each event the turn committed (its id,
  type, case, revision and sequence stay: receipts stay backed, readers' cursors do not move), the
  words of each card the turn created once it settled, the payload of each journal entry the turn
  admitted once it settled, the payload of each outbox row the record lists once it settled; the
  turn's stream log is deleted whole (it only served the reply, which the store keeps). Only
  content is written, never a lifecycle.
- What it keeps: every id, kind, status, code, time, order and digest; the audit chain's links are
  never written. A command or outbox row not settled yet keeps its payload (it still has to run or
  be sent with it) and is reported in `kept`; so is a card still open (a click on it runs what it
  stored).
- Erasing an erased turn writes nothing and says so (`already`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from turnframe_core.erasure import (
    TurnErasure,
    erase_card,
    erase_input,
    erase_record,
    erase_reply,
    erase_value,
)
from turnframe_core.events import DomainEvent
from turnframe_core.interactions import Interaction
from turnframe_core.replay import ReplayRecord
from turnframe_core.turn import AssistantTurn
from turnframe_store.records import JournalEntry, OutboxEntry, UserTurnRecord

__all__ = ["ErasurePlan", "TurnDocuments", "plan_erasure"]


@dataclass(frozen=True)
class TurnDocuments:
    """What a store holds of one turn, read in the erasing transaction."""

    record: ReplayRecord
    user_turn: UserTurnRecord | None
    reply: AssistantTurn | None
    journal: tuple[JournalEntry, ...]
    outbox: tuple[OutboxEntry, ...]
    stream_events: int
    #: the cards the turn created
    cards: tuple[Interaction, ...] = ()
    #: the events the turn committed
    events: tuple[DomainEvent, ...] = ()


@dataclass(frozen=True)
class ErasurePlan:
    """The writes that erase one turn (None: leave that document as it is)."""

    result: TurnErasure
    record: ReplayRecord | None = None
    user_turn: UserTurnRecord | None = None
    reply: AssistantTurn | None = None
    journal: tuple[JournalEntry, ...] = ()
    outbox: tuple[OutboxEntry, ...] = ()
    cards: tuple[Interaction, ...] = ()
    events: tuple[DomainEvent, ...] = ()
    drop_stream: bool = False

    @property
    def complete(self) -> bool:
        """Nothing of the turn holds words once this plan is written: the store marks the turn
        done (the retention sweep passes it by from then on)."""
        return self.result.erased and not self.result.kept

    @property
    def writes(self) -> bool:
        documents = (
            self.record,
            self.user_turn,
            self.reply,
            self.journal,
            self.outbox,
            self.cards,
            self.events,
        )
        return any(documents) or self.drop_stream


_Settles = TypeVar("_Settles", JournalEntry, OutboxEntry)


def _settled_payloads(
    rows: tuple[_Settles, ...], what: str, kept: list[str]
) -> tuple[_Settles, ...]:
    """Each settled row whose payload holds values, with its payload erased; a row not settled
    yet keeps its payload (it still has to run or be sent with it) and is named in `kept`."""
    erased: list[_Settles] = []
    for row in rows:
        if not row.status.is_terminal:
            ident = row.command_id if isinstance(row, JournalEntry) else row.outbox_id
            kept.append(f"{what} {ident}: {row.status.value}")
        elif (payload := erase_value(row.payload)) != row.payload:
            erased.append(row.model_copy(update={"payload": payload}))
    return tuple(erased)


def plan_erasure(docs: TurnDocuments, at: int) -> ErasurePlan:
    """The writes erasing `docs`' turn at `at` (see the module's rules)."""
    record = docs.record
    if not record.phase.is_terminal:
        return ErasurePlan(
            TurnErasure(turn_id=record.turn_id, erased=False, kept=("turn: still running",))
        )
    kept: list[str] = []
    journal = _settled_payloads(docs.journal, "command", kept)
    outbox = _settled_payloads(docs.outbox, "outbox", kept)
    cards: list[Interaction] = []
    for card in docs.cards:
        if card.status.is_open:
            kept.append(f"card {card.interaction_id}: {card.status.value}")
        elif (erased_card := erase_card(card)) != card:
            cards.append(erased_card)
    events = [
        event.model_copy(update={"payload": payload})
        for event in docs.events
        if (payload := erase_value(event.payload)) != event.payload
    ]
    erased_record = erase_record(record, at)
    user_turn = docs.user_turn
    erased_input = None
    if user_turn is not None and (words := erase_input(user_turn.input)) != user_turn.input:
        erased_input = user_turn.model_copy(update={"input": words})
    reply = docs.reply
    erased_reply = erase_reply(reply) if reply is not None else None
    plan = ErasurePlan(
        TurnErasure(turn_id=record.turn_id, erased=True, kept=tuple(kept)),
        record=erased_record if erased_record != record else None,
        user_turn=erased_input,
        reply=erased_reply if erased_reply != reply else None,
        journal=journal,
        outbox=outbox,
        cards=tuple(cards),
        events=tuple(events),
        drop_stream=docs.stream_events > 0,
    )
    if not plan.writes:
        return ErasurePlan(
            TurnErasure(turn_id=record.turn_id, erased=True, already=True, kept=tuple(kept))
        )
    return plan
