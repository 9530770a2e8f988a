"""Replay records on SQL (internal)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from turnframe_core.replay import ReplayRecord
from turnframe_store import _rules as rules
from turnframe_store._roles import ReplayRole
from turnframe_store._rules import Verdict
from turnframe_store.errors import Conflict, InvalidRecord
from turnframe_store.sql._backend import Result, Row, Statement
from turnframe_store.sql._core import SqlCore, Step, first, refuse
from turnframe_store.sql._rows import document
from turnframe_store.sql._statements import Compiler, among, bind, values_of

__all__ = ["ReplayStatements", "SqlReplay"]


@dataclass(frozen=True)
class ReplayStatements:
    replay_put: Statement
    replay_get: Statement
    replay_get_by_token: Statement
    replay_of_conversation: Statement
    replay_last_of_conversation: Statement

    @classmethod
    def build(cls, sql: Compiler) -> ReplayStatements:
        c = sql.compile
        replay = sql.tables["tf_replay"]
        account = bind("account_id")
        of_conversation = (
            replay.c.account_id == account,
            replay.c.conversation_id == bind("conversation_id"),
        )
        upsert = sql.insert(replay).values(values_of(replay))
        return cls(
            # `_rules.put_replay`: upserted while the stored phase is not terminal and the
            # record stays in its conversation.
            replay_put=c(
                "replay_put",
                upsert.on_conflict_do_update(
                    index_elements=[replay.c.account_id, replay.c.turn_id],
                    set_={
                        "phase": upsert.excluded.phase,
                        "recorded_at": upsert.excluded.recorded_at,
                        "record": upsert.excluded.record,
                    },
                    where=sa.and_(
                        ~among(replay.c.phase, rules.TERMINAL_PHASES),
                        replay.c.conversation_id == upsert.excluded.conversation_id,
                    ),
                ).returning(replay.c.turn_id),
            ),
            replay_get=c(
                "replay_get",
                sa.select(replay.c.record).where(
                    replay.c.account_id == account, replay.c.turn_id == bind("turn_id")
                ),
            ),
            replay_get_by_token=c(
                "replay_get_by_token",
                sa.select(replay.c.record).where(
                    replay.c.account_id == account,
                    replay.c.replay_token == bind("replay_token"),
                ),
            ),
            replay_of_conversation=c(
                "replay_of_conversation",
                sa.select(replay.c.record)
                .where(*of_conversation)
                .order_by(replay.c.first_recorded_at, replay.c.turn_id),
            ),
            replay_last_of_conversation=c(
                "replay_last_of_conversation",
                sa.select(replay.c.record)
                .where(*of_conversation)
                .order_by(replay.c.first_recorded_at.desc(), replay.c.turn_id.desc())
                .limit(1),
            ),
        )


class SqlReplay(ReplayRole):
    def __init__(self, core: SqlCore) -> None:
        super().__init__(core.faults)
        self._core = core
        self._st = core.sql.statements(ReplayStatements)

    def replay_steps(self, record: ReplayRecord) -> list[Step]:
        try:
            rules.derived_token(record)
        except InvalidRecord as refusal:
            return [refuse(refusal)]
        text = document(record)

        async def judge(result: Result | None, prior: Row | None) -> None:
            assert result is not None
            if result.rows:
                return
            stored = self._core.codec.replay(rules.found(prior))
            if rules.put_replay(stored, record) is Verdict.MOVE:
                raise Conflict("the replay record moved under a concurrent writer")

        key = {"account_id": record.account_id, "turn_id": record.turn_id}
        params = self._core.codec.replay_params(record, text)
        return [Step(self._st.replay_put, params, judge, self._st.replay_get, key)]

    async def _put(self, record: ReplayRecord) -> None:
        await self._core.write(self.replay_steps(record))

    async def _one(self, statement: Statement, params: dict[str, Any]) -> ReplayRecord:
        return self._core.codec.replay(await self._core.fetch_one(statement, params))

    async def _get(self, account_id: str, turn_id: str) -> ReplayRecord:
        return await self._one(self._st.replay_get, {"account_id": account_id, "turn_id": turn_id})

    async def _get_by_token(self, account_id: str, replay_token: str) -> ReplayRecord:
        return await self._one(
            self._st.replay_get_by_token,
            {"account_id": account_id, "replay_token": replay_token},
        )

    async def _for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[ReplayRecord, ...]:
        rows = await self._core.fetch(
            self._st.replay_of_conversation,
            {"account_id": account_id, "conversation_id": conversation_id},
        )
        return tuple(self._core.codec.replay(row) for row in rows)

    async def _last_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> ReplayRecord | None:
        params = {"account_id": account_id, "conversation_id": conversation_id}
        row = first(await self._core.fetch(self._st.replay_last_of_conversation, params))
        return None if row is None else self._core.codec.replay(row)
