"""Conversations, turns and phase markers on SQL (internal)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import sqlalchemy as sa

from turnframe_core.replay import TurnPhase
from turnframe_core.turn import AssistantTurn
from turnframe_store.errors import Conflict, InvalidRecord, NotFound
from turnframe_store.records import ConversationRecord, PhaseMarker, UserTurnRecord
from turnframe_store.roles import conversations as turn_rules
from turnframe_store.roles import rules
from turnframe_store.roles.conversations import ConversationStore, StreamEntry
from turnframe_store.sql._backend import Result, Row, Statement
from turnframe_store.sql._core import SqlCore, Step, first
from turnframe_store.sql._statements import Compiler, among, bind, values_of
from turnframe_store.sql._stream import StreamLog

__all__ = ["ConversationStatements", "SqlConversations"]


@dataclass(frozen=True)
class ConversationStatements:
    conversation_insert: Statement
    conversation_get: Statement
    turn_insert: Statement
    turn_get: Statement
    turns_of_conversation: Statement
    answers_of_conversation: Statement
    feed_of_conversation: Statement
    turn_answer: Statement
    phase_insert: Statement
    phase_get: Statement
    phase_move: Statement
    phases_unfinished: Statement

    @classmethod
    def build(cls, sql: Compiler) -> ConversationStatements:
        c = sql.compile
        conversation = sql.tables["tf_conversation"]
        turn = sql.tables["tf_turn"]
        phase = sql.tables["tf_turn_phase"]
        link = sql.tables["tf_audit_link"]
        account = bind("account_id")
        user_turn = (
            turn.c.account_id,
            turn.c.conversation_id,
            turn.c.turn_id,
            turn.c.received_at,
            turn.c.user_input,
        )
        return cls(
            conversation_insert=c(
                "conversation_insert",
                sql.insert(conversation).values(values_of(conversation)).on_conflict_do_nothing(),
            ),
            conversation_get=c(
                "conversation_get",
                sa.select(conversation).where(
                    conversation.c.account_id == account,
                    conversation.c.conversation_id == bind("conversation_id"),
                ),
            ),
            turn_insert=c("turn_insert", sa.insert(turn).values(values_of(turn, "assistant_turn"))),
            turn_get=c(
                "turn_get",
                sa.select(*user_turn, turn.c.assistant_turn).where(
                    turn.c.account_id == account, turn.c.turn_id == bind("turn_id")
                ),
            ),
            turns_of_conversation=c(
                "turns_of_conversation",
                sa.select(*user_turn)
                .where(
                    turn.c.account_id == account,
                    turn.c.conversation_id == bind("conversation_id"),
                )
                .order_by(turn.c.received_at, turn.c.turn_id),
            ),
            answers_of_conversation=c(
                "answers_of_conversation",
                sa.select(turn.c.assistant_turn)
                .where(
                    turn.c.account_id == account,
                    turn.c.conversation_id == bind("conversation_id"),
                    turn.c.assistant_turn.is_not(None),
                )
                .order_by(turn.c.received_at.desc(), turn.c.turn_id.desc())
                .limit(bind("limit")),
            ),
            # The feed: the chain's links after a position (served by the link's primary key,
            # account_id, conversation_id, position), each with its turn's stored reply.
            feed_of_conversation=c(
                "feed_of_conversation",
                sa.select(link.c.position, link.c.turn_id, turn.c.assistant_turn)
                .select_from(
                    link.outerjoin(
                        turn,
                        sa.and_(
                            turn.c.account_id == link.c.account_id,
                            turn.c.turn_id == link.c.turn_id,
                        ),
                    )
                )
                .where(
                    link.c.account_id == account,
                    link.c.conversation_id == bind("conversation_id"),
                    link.c.position > bind("after_position"),
                )
                .order_by(link.c.position)
                .limit(bind("limit")),
            ),
            turn_answer=c(
                "turn_answer",
                sa.update(turn)
                .where(
                    turn.c.account_id == account,
                    turn.c.turn_id == bind("turn_id"),
                    turn.c.conversation_id == bind("conversation_id"),
                    turn.c.assistant_turn.is_(None),
                )
                .values(assistant_turn=bind("assistant_turn"))
                .returning(turn.c.turn_id),
            ),
            phase_insert=c("phase_insert", sa.insert(phase).values(values_of(phase))),
            phase_get=c(
                "phase_get",
                sa.select(phase).where(
                    phase.c.account_id == account, phase.c.turn_id == bind("turn_id")
                ),
            ),
            # `turn_rules.move_phase`: a marker moves until its phase is terminal.
            phase_move=c(
                "phase_move",
                sa.update(phase)
                .where(
                    phase.c.account_id == account,
                    phase.c.turn_id == bind("turn_id"),
                    ~among(phase.c.phase, turn_rules.TERMINAL_PHASES),
                    phase.c.phase != bind("phase"),
                )
                .values(phase=bind("phase"), updated_at=bind("updated_at", phase.c.updated_at.type))
                .returning(*phase.c),
            ),
            phases_unfinished=c(
                "phases_unfinished",
                sa.select(phase)
                .where(~among(phase.c.phase, turn_rules.TERMINAL_PHASES))
                .order_by(phase.c.updated_at, phase.c.account_id, phase.c.turn_id)
                .limit(bind("limit")),
            ),
        )


class SqlConversations(ConversationStore):
    def __init__(self, core: SqlCore) -> None:
        super().__init__(core.faults)
        self._core = core
        self._st = core.sql.statements(ConversationStatements)
        self.stream = StreamLog(core)

    async def _get_conversation(self, account_id: str, conversation_id: str) -> ConversationRecord:
        key = {"account_id": account_id, "conversation_id": conversation_id}
        return self._core.codec.conversation(
            await self._core.fetch_one(self._st.conversation_get, key)
        )

    async def _ensure_conversation(
        self, account_id: str, conversation_id: str
    ) -> ConversationRecord:
        try:
            return await self._get_conversation(account_id, conversation_id)
        except NotFound:
            pass
        record = turn_rules.new_conversation(account_id, conversation_id, self._core.clock())
        key = {"account_id": account_id, "conversation_id": conversation_id}

        async def stored(result: Result | None, prior: Row | None) -> ConversationRecord:
            assert result is not None
            return self._core.codec.conversation(result.rows[0])

        _, found = await self._core.write(
            [
                Step(
                    self._st.conversation_insert,
                    {**key, "created_at": self._core.backend.time_in(record.created_at)},
                ),
                Step(self._st.conversation_get, key, stored),
            ]
        )
        return found  # type: ignore[no-any-return]

    async def _get_user_turn(self, account_id: str, turn_id: str) -> UserTurnRecord:
        key = {"account_id": account_id, "turn_id": turn_id}
        return self._core.codec.user_turn(await self._core.fetch_one(self._st.turn_get, key))

    async def _append_user_turn(self, record: UserTurnRecord) -> None:
        try:
            await self._core.write(
                [
                    Step(self._st.turn_insert, self._core.codec.user_turn_params(record)),
                    Step(self._st.phase_insert, self._marker(record)),
                ]
            )
        except Conflict:
            # Memory asks for the conversation first: a stored turn id under a conversation that
            # does not exist is NotFound. Conversations are never deleted, so this read decides.
            key = {"account_id": record.account_id, "conversation_id": record.conversation_id}
            if not await self._core.fetch(self._st.conversation_get, key):
                raise NotFound() from None
            raise

    def accept_steps(self, record: UserTurnRecord) -> list[Step]:
        """The bundle's user turn (its ids validated with it): its conversation created if
        missing, the turn, its marker."""
        return [
            Step(
                self._st.conversation_insert,
                {
                    "account_id": record.account_id,
                    "conversation_id": record.conversation_id,
                    "created_at": self._core.now(),
                },
            ),
            Step(self._st.turn_insert, self._core.codec.user_turn_params(record)),
            Step(self._st.phase_insert, self._marker(record)),
        ]

    def _marker(self, record: UserTurnRecord) -> dict[str, Any]:
        return {
            "account_id": record.account_id,
            "turn_id": record.turn_id,
            "conversation_id": record.conversation_id,
            "phase": TurnPhase.RECEIVED.value,
            "updated_at": self._core.now(),
        }

    def answer_steps(self, account_id: str, turn: AssistantTurn) -> list[Step]:
        """The assistant turn, stored once (the same turn again is accepted)."""
        key = {"account_id": account_id, "turn_id": turn.turn_id}
        judge_row = partial(_judge_answer, turn)
        text = turn_rules.answer_text(turn)

        async def judge(result: Result | None, prior: Row | None) -> None:
            if result is None or not result.rows:
                judge_row(prior)

        return [
            Step(
                self._st.turn_answer,
                {**key, "conversation_id": turn.conversation_id, "assistant_turn": text},
                judge,
                self._st.turn_get,
                key,
            )
        ]

    async def _append_assistant_turn(
        self, account_id: str, turn: AssistantTurn, phase: TurnPhase | None
    ) -> None:
        try:
            turn_rules.answer_text(turn)
        except InvalidRecord:
            # Judged on the stored row first, in memory's order (NotFound before this refusal).
            key = {"account_id": account_id, "turn_id": turn.turn_id}
            _judge_answer(turn, first(await self._core.fetch(self._st.turn_get, key)))
            raise
        steps = self.answer_steps(account_id, turn)
        if phase is not None:
            steps.extend(self.phase_steps(account_id, turn.turn_id, phase))
        await self._core.write(steps)

    async def _get_assistant_turn(self, account_id: str, turn_id: str) -> AssistantTurn:
        key = {"account_id": account_id, "turn_id": turn_id}
        row = first(await self._core.fetch(self._st.turn_get, key))
        return turn_rules.reload_answer(rules.found(None if row is None else row["assistant_turn"]))

    def phase_steps(self, account_id: str, turn_id: str, phase: TurnPhase) -> list[Step]:
        key = {"account_id": account_id, "turn_id": turn_id}
        params = {**key, "phase": phase.value, "updated_at": self._core.now()}
        return [
            self._core.cas(
                self._st.phase_move,
                params,
                self._st.phase_get,
                key,
                self._core.codec.marker,
                lambda marker: turn_rules.move_phase(marker, phase),
            )
        ]

    async def _set_phase(self, account_id: str, turn_id: str, phase: TurnPhase) -> PhaseMarker:
        (marker,) = await self._core.write(self.phase_steps(account_id, turn_id, phase))
        return marker  # type: ignore[no-any-return]

    async def _get_phase(self, account_id: str, turn_id: str) -> PhaseMarker:
        key = {"account_id": account_id, "turn_id": turn_id}
        return self._core.codec.marker(await self._core.fetch_one(self._st.phase_get, key))

    async def _list_turns(
        self, account_id: str, conversation_id: str
    ) -> tuple[UserTurnRecord, ...]:
        rows = await self._core.fetch(
            self._st.turns_of_conversation,
            {"account_id": account_id, "conversation_id": conversation_id},
        )
        return tuple(self._core.codec.user_turn(row) for row in rows)

    async def _recent_turns(
        self, account_id: str, conversation_id: str, limit: int
    ) -> tuple[str, ...]:
        params = {"account_id": account_id, "conversation_id": conversation_id, "limit": limit}
        rows = await self._core.fetch(self._st.answers_of_conversation, params)
        return tuple(str(row["assistant_turn"]) for row in reversed(rows))

    async def _feed(
        self, account_id: str, conversation_id: str, after_position: int, limit: int
    ) -> tuple[tuple[int, str, str | None], ...]:
        params = {
            "account_id": account_id,
            "conversation_id": conversation_id,
            "after_position": after_position,
            "limit": limit,
        }
        rows = await self._core.fetch(self._st.feed_of_conversation, params)
        return tuple(
            (
                int(row["position"]),
                str(row["turn_id"]),
                None if row["assistant_turn"] is None else str(row["assistant_turn"]),
            )
            for row in rows
        )

    async def _list_unfinished_turns(self, limit: int) -> tuple[PhaseMarker, ...]:
        rows = await self._core.fetch(self._st.phases_unfinished, {"limit": limit})
        return tuple(self._core.codec.marker(row) for row in rows)

    async def _stream_events(
        self, account_id: str, turn_id: str, after_sequence: int, limit: int
    ) -> tuple[str, ...]:
        return await self.stream.events(account_id, turn_id, after_sequence, limit)

    async def _stream_tail(self, account_id: str, turn_id: str) -> str | None:
        return await self.stream.tail(account_id, turn_id)

    async def _append_stream_events(
        self, account_id: str, entries: tuple[StreamEntry, ...]
    ) -> None:
        await self.stream.append(account_id, entries)

    async def _prune_stream_events(self, finished_before: int, limit: int) -> int:
        return await self.stream.prune(finished_before, limit)


def _judge_answer(turn: AssistantTurn, row: Row | None) -> None:
    """`turn_rules.answer` on the turn's row as the answering UPDATE left it (it moved nothing)."""
    conversation_id = None if row is None else row["conversation_id"]
    stored = None if row is None else row["assistant_turn"]
    if turn_rules.answer(turn, conversation_id, stored) is not None:
        raise Conflict("the turn moved under a concurrent writer")
