"""Erasing one turn on SQL (internal): its documents read and rewritten in one transaction, as
`roles.erasure.plan_erasure` says.

The replay row is read first, `FOR UPDATE` on PostgreSQL, so two erasures of one turn queue on it
(the second then finds the turn erased and writes nothing). Only content columns are written
(`user_input`, `assistant_turn`, an event's `payload`, a card's `interaction`, a journal entry's
`entry`, an outbox row's `payload`, the record): a lifecycle column a concurrent writer moves is
never overwritten. A card or an outbox row is rewritten only while it is still settled. The record
is written last: a failure before it undoes the transaction, and the turn is then as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from turnframe_core.erasure import TurnErasure
from turnframe_core.events import DomainEvent
from turnframe_core.interactions import Interaction, InteractionStatus
from turnframe_store.errors import NotFound
from turnframe_store.records import OutboxEntry, OutboxStatus
from turnframe_store.roles import conversations as turn_rules
from turnframe_store.roles.erasure import TurnDocuments, plan_erasure
from turnframe_store.sql._backend import Connection, Statement
from turnframe_store.sql._core import SqlCore
from turnframe_store.sql._rows import JOURNAL_LIFECYCLE, document
from turnframe_store.sql._statements import Compiler, among, bind

__all__ = ["ErasureStatements", "SqlErasure"]

_SETTLED = {status for status in OutboxStatus if status.is_terminal}
_SETTLED_CARDS = {status for status in InteractionStatus if not status.is_open}


@dataclass(frozen=True)
class ErasureStatements:
    record_lock: Statement
    turn_row: Statement
    journal_of_turn: Statement
    outbox_row: Statement
    card_row: Statement
    event_row: Statement
    event_rewrite: Statement
    card_rewrite: Statement
    stream_count: Statement
    turn_rewrite: Statement
    entry_rewrite: Statement
    payload_rewrite: Statement
    stream_drop: Statement
    record_rewrite: Statement
    record_done: Statement

    @classmethod
    def build(cls, sql: Compiler) -> ErasureStatements:
        c = sql.compile
        replay = sql.tables["tf_replay"]
        turn = sql.tables["tf_turn"]
        journal = sql.tables["tf_command_journal"]
        outbox = sql.tables["tf_outbox"]
        log = sql.tables["tf_stream_event"]
        card = sql.tables["tf_interaction"]
        event = sql.tables["tf_domain_event"]
        of_event = (event.c.account_id == bind("account_id"), event.c.event_id == bind("event_id"))
        of_card = (
            card.c.account_id == bind("account_id"),
            card.c.interaction_id == bind("interaction_id"),
        )
        account, turn_id = bind("account_id"), bind("turn_id")
        lock = sa.select(replay.c.record).where(
            replay.c.account_id == account, replay.c.turn_id == turn_id
        )
        return cls(
            record_lock=c("erase_record_lock", lock.with_for_update() if sql.postgres else lock),
            turn_row=c(
                "erase_turn_row",
                sa.select(
                    turn.c.account_id,
                    turn.c.conversation_id,
                    turn.c.turn_id,
                    turn.c.received_at,
                    turn.c.user_input,
                    turn.c.assistant_turn,
                ).where(turn.c.account_id == account, turn.c.turn_id == turn_id),
            ),
            journal_of_turn=c(
                "erase_journal_of_turn",
                sa.select(journal)
                .where(journal.c.account_id == account, journal.c.turn_id == turn_id)
                .order_by(journal.c.created_at, journal.c.command_id),
            ),
            outbox_row=c(
                "erase_outbox_row",
                sa.select(outbox).where(outbox.c.outbox_id == bind("outbox_id")),
            ),
            card_row=c("erase_card_row", sa.select(card).where(*of_card)),
            event_row=c("erase_event_row", sa.select(event).where(*of_event)),
            event_rewrite=c(
                "erase_event_rewrite",
                sa.update(event).where(*of_event).values(payload=bind("payload")),
            ),
            card_rewrite=c(
                "erase_card_rewrite",
                sa.update(card)
                .where(*of_card, among(card.c.status, _SETTLED_CARDS))
                .values(interaction=bind("interaction")),
            ),
            stream_count=c(
                "erase_stream_count",
                sa.select(sa.func.count().label("events")).where(
                    log.c.account_id == account, log.c.turn_id == turn_id
                ),
            ),
            turn_rewrite=c(
                "erase_turn_rewrite",
                sa.update(turn)
                .where(turn.c.account_id == account, turn.c.turn_id == turn_id)
                .values(user_input=bind("user_input"), assistant_turn=bind("assistant_turn")),
            ),
            entry_rewrite=c(
                "erase_entry_rewrite",
                sa.update(journal)
                .where(journal.c.account_id == account, journal.c.command_id == bind("command_id"))
                .values(entry=bind("entry")),
            ),
            payload_rewrite=c(
                "erase_payload_rewrite",
                sa.update(outbox)
                .where(outbox.c.outbox_id == bind("outbox_id"), among(outbox.c.status, _SETTLED))
                .values(payload=bind("payload")),
            ),
            stream_drop=c(
                "erase_stream_drop",
                sa.delete(log).where(log.c.account_id == account, log.c.turn_id == turn_id),
            ),
            record_rewrite=c(
                "erase_record_rewrite",
                sa.update(replay)
                .where(replay.c.account_id == account, replay.c.turn_id == turn_id)
                .values(record=bind("record")),
            ),
            record_done=c(
                "erase_record_done",
                sa.update(replay)
                .where(
                    replay.c.account_id == account,
                    replay.c.turn_id == turn_id,
                    replay.c.erased_at.is_(None),
                )
                .values(erased_at=bind("erased_at", replay.c.erased_at.type)),
            ),
        )


class SqlErasure:
    """`CommitStore.erase_turn` on SQL."""

    def __init__(self, core: SqlCore) -> None:
        self._core = core
        self._st = core.sql.statements(ErasureStatements)

    async def erase_turn(self, account_id: str, turn_id: str) -> TurnErasure:
        return await self._core.transaction(lambda c: self._erase(c, account_id, turn_id))

    async def _erase(self, connection: Connection, account_id: str, turn_id: str) -> TurnErasure:
        st, codec = self._st, self._core.codec
        key = {"account_id": account_id, "turn_id": turn_id}
        rows = await connection.fetch(st.record_lock, key)
        if not rows:
            raise NotFound()
        record = codec.replay(rows[0])
        turn_rows = await connection.fetch(st.turn_row, key)
        turn_row = turn_rows[0] if turn_rows else None
        stored_reply = None if turn_row is None else turn_row["assistant_turn"]
        outbox: list[OutboxEntry] = []
        for outbox_id in record.outbox_ids:
            found = await connection.fetch(st.outbox_row, {"outbox_id": outbox_id})
            outbox.extend(codec.outbox(row) for row in found)
        cards: list[Interaction] = []
        for interaction_id in record.interactions_created:
            params = {"account_id": account_id, "interaction_id": interaction_id}
            cards.extend(codec.card(row) for row in await connection.fetch(st.card_row, params))
        events: list[DomainEvent] = []
        for event_id in record.event_ids:
            params = {"account_id": account_id, "event_id": event_id}
            events.extend(codec.event(row) for row in await connection.fetch(st.event_row, params))
        docs = TurnDocuments(
            record=record,
            user_turn=None if turn_row is None else codec.user_turn(turn_row),
            reply=None if stored_reply is None else turn_rules.reload_answer(stored_reply),
            journal=codec.entries(await connection.fetch(st.journal_of_turn, key)),
            outbox=tuple(outbox),
            stream_events=int((await connection.fetch(st.stream_count, key))[0]["events"]),
            cards=tuple(cards),
            events=tuple(events),
        )
        plan = plan_erasure(docs, self._core.clock())
        if plan.user_turn is not None or plan.reply is not None:
            assert turn_row is not None
            user_input = (
                document(plan.user_turn.input) if plan.user_turn else turn_row["user_input"]
            )
            reply = turn_rules.answer_text(plan.reply) if plan.reply else stored_reply
            await _write(
                connection,
                st.turn_rewrite,
                {**key, "user_input": user_input, "assistant_turn": reply},
            )
        for entry in plan.journal:
            admitted = entry.model_dump(mode="json", exclude=set(JOURNAL_LIFECYCLE))
            params = {"account_id": account_id, "command_id": entry.command_id}
            await _write(connection, st.entry_rewrite, {**params, "entry": document(admitted)})
        for row in plan.outbox:
            params = {"outbox_id": row.outbox_id, "payload": document(row.payload)}
            await _write(connection, st.payload_rewrite, params)
        for card in plan.cards:
            params = {"account_id": account_id, "interaction_id": card.interaction_id}
            await _write(connection, st.card_rewrite, {**params, "interaction": document(card)})
        for event in plan.events:
            params = {"account_id": account_id, "event_id": event.event_id}
            await _write(
                connection, st.event_rewrite, {**params, "payload": document(event.payload)}
            )
        if plan.drop_stream:
            await _write(connection, st.stream_drop, key)
        if plan.record is not None:
            await _write(connection, st.record_rewrite, {**key, "record": document(plan.record)})
        if plan.complete:
            await _write(connection, st.record_done, {**key, "erased_at": self._core.now()})
        return plan.result


async def _write(connection: Connection, statement: Statement, params: dict[str, Any]) -> None:
    outcome = await connection.run(((statement, params),))
    if outcome.error is not None:
        raise outcome.error
