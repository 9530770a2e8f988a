"""Replay records on SQL (internal)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from turnframe_core.audit_chain import ChainLink
from turnframe_core.canonical import digest_bytes
from turnframe_core.replay import ReplayRecord
from turnframe_store.errors import Conflict, InvalidRecord
from turnframe_store.roles import conversations as turn_rules
from turnframe_store.roles import replay as replay_rules
from turnframe_store.roles import rules
from turnframe_store.roles.replay import ReplayStore
from turnframe_store.roles.rules import Verdict
from turnframe_store.sql._backend import Result, Row, Statement
from turnframe_store.sql._core import SqlCore, Step, Then, first, refuse
from turnframe_store.sql._rows import document
from turnframe_store.sql._statements import Compiler, among, bind, values_of

__all__ = ["ReplayStatements", "SqlReplay"]


@dataclass(frozen=True)
class ReplayStatements:
    replay_put: Statement
    replay_get: Statement
    replay_get_by_token: Statement
    replay_of_conversation: Statement
    replay_unerased: Statement
    replay_last_of_conversation: Statement
    link_last: Statement
    link_insert: Statement
    links_of_conversation: Statement
    accounts_with_token: Statement
    accounts_with_conversation: Statement

    @classmethod
    def build(cls, sql: Compiler) -> ReplayStatements:
        c = sql.compile
        replay = sql.tables["tf_replay"]
        account = bind("account_id")
        of_conversation = (
            replay.c.account_id == account,
            replay.c.conversation_id == bind("conversation_id"),
        )
        upsert = sql.insert(replay).values(values_of(replay, "erased_at"))
        link = sql.tables["tf_audit_link"]
        link_of_conversation = (
            link.c.account_id == account,
            link.c.conversation_id == bind("conversation_id"),
        )
        return cls(
            # `roles.replay.put_replay`: upserted while the stored phase is not terminal and the
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
                        ~among(replay.c.phase, turn_rules.TERMINAL_PHASES),
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
            replay_unerased=c(
                "replay_unerased",
                sa.select(replay.c.account_id, replay.c.turn_id)
                .where(
                    replay.c.erased_at.is_(None),
                    among(replay.c.phase, turn_rules.TERMINAL_PHASES),
                    replay.c.recorded_at < bind("before", replay.c.recorded_at.type),
                )
                .order_by(
                    # a turn erased before that still keeps words (a card open, a command not
                    # run) after every turn never erased: those cannot hold the sweep up
                    sa.case((replay.c.record.like('%"erased_at":%'), 1), else_=0),
                    replay.c.recorded_at,
                    replay.c.account_id,
                    replay.c.turn_id,
                )
                .limit(bind("limit")),
            ),
            replay_last_of_conversation=c(
                "replay_last_of_conversation",
                sa.select(replay.c.record)
                .where(*of_conversation)
                .order_by(replay.c.first_recorded_at.desc(), replay.c.turn_id.desc())
                .limit(1),
            ),
            link_last=c(
                "link_last",
                sa.select(link)
                .where(*link_of_conversation)
                .order_by(link.c.position.desc())
                .limit(1),
            ),
            # A turn is linked once (a final record put again is a repeat); a position taken by
            # another turn is an error, never skipped.
            link_insert=c(
                "link_insert",
                sql.insert(link)
                .values(values_of(link))
                .on_conflict_do_nothing(index_elements=[link.c.account_id, link.c.turn_id]),
            ),
            links_of_conversation=c(
                "links_of_conversation",
                sa.select(link).where(*link_of_conversation).order_by(link.c.position),
            ),
            accounts_with_token=c(
                "accounts_with_token",
                sa.select(replay.c.account_id)
                .where(replay.c.replay_token == bind("replay_token"))
                .distinct()
                .order_by(replay.c.account_id),
            ),
            accounts_with_conversation=c(
                "accounts_with_conversation",
                sa.select(replay.c.account_id)
                .where(replay.c.conversation_id == bind("conversation_id"))
                .distinct()
                .order_by(replay.c.account_id),
            ),
        )


class SqlReplay(ReplayStore):
    def __init__(self, core: SqlCore) -> None:
        super().__init__(core.faults)
        self._core = core
        self._st = core.sql.statements(ReplayStatements)

    def replay_steps(self, record: ReplayRecord) -> list[Step]:
        try:
            replay_rules.derived_token(record)
        except InvalidRecord as refusal:
            return [refuse(refusal)]
        text = document(record)

        async def judge(result: Result | None, prior: Row | None) -> None:
            assert result is not None
            if result.rows:
                return
            stored = self._core.codec.replay(rules.found(prior))
            if replay_rules.put_replay(stored, record) is Verdict.MOVE:
                raise Conflict("the replay record moved under a concurrent writer")

        key = {"account_id": record.account_id, "turn_id": record.turn_id}
        params = self._core.codec.replay_params(record, text)
        steps = [Step(self._st.replay_put, params, judge, self._st.replay_get, key)]
        if record.phase.is_terminal:  # the write that makes it final links it, once
            # a sealed record's digest is not its text's (decision 0032)
            sealed = record.digest_scheme != 1
            text_digest = record.digest() if sealed else digest_bytes(text.encode("utf-8"))
            steps.append(self._link_step(record, text_digest))
        return steps

    def _link_step(self, record: ReplayRecord, record_digest: str) -> Step:
        codec = self._core.codec

        async def link(result: Result | None, prior: Row | None) -> Then | None:
            assert result is not None
            last = codec.link(result.rows[0]) if result.rows else None
            if last is not None and last.turn_id == record.turn_id:
                return None  # linked already: the final record put again
            link = ChainLink.after(last, record, record_digest)
            return Then(self._st.link_insert, [codec.link_params(link)])

        where = {"account_id": record.account_id, "conversation_id": record.conversation_id}
        return Step(self._st.link_last, where, link)

    async def _chain(self, account_id: str, conversation_id: str) -> tuple[ChainLink, ...]:
        rows = await self._core.fetch(
            self._st.links_of_conversation,
            {"account_id": account_id, "conversation_id": conversation_id},
        )
        return tuple(self._core.codec.link(row) for row in rows)

    async def _accounts_with_token(self, replay_token: str) -> tuple[str, ...]:
        rows = await self._core.fetch(self._st.accounts_with_token, {"replay_token": replay_token})
        return tuple(row["account_id"] for row in rows)

    async def _accounts_with_conversation(self, conversation_id: str) -> tuple[str, ...]:
        rows = await self._core.fetch(
            self._st.accounts_with_conversation, {"conversation_id": conversation_id}
        )
        return tuple(row["account_id"] for row in rows)

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

    async def _unerased_before(self, before: int, limit: int) -> tuple[tuple[str, str], ...]:
        rows = await self._core.fetch(
            self._st.replay_unerased,
            {"before": self._core.backend.time_in(before), "limit": limit},
        )
        return tuple((row["account_id"], row["turn_id"]) for row in rows)

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
