"""The command journal on SQL (internal)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import sqlalchemy as sa

from turnframe_core.replay import CommandOutcome
from turnframe_store.records import Fresh, JournalAdmission, JournalEntry, JournalStatus
from turnframe_store.roles import journal as journal_rules
from turnframe_store.roles.journal import CommandJournal
from turnframe_store.sql._backend import Result, Row, Statement
from turnframe_store.sql._core import SqlCore, Step
from turnframe_store.sql._statements import Compiler, among, bind, values_of

__all__ = ["JournalStatements", "SqlJournal"]


@dataclass(frozen=True)
class JournalStatements:
    journal_insert: Statement
    journal_get: Statement
    journal_get_by_key: Statement
    journal_of_turn: Statement
    journal_unsettled_of_turn: Statement
    journal_start: Statement
    #: One statement per status an outcome settles an entry into
    #: (`journal_rules.JOURNAL_SETTLEMENTS`).
    journal_settle: Mapping[JournalStatus, Statement]

    @classmethod
    def build(cls, sql: Compiler) -> JournalStatements:
        c = sql.compile
        journal = sql.tables["tf_command_journal"]
        account = bind("account_id")
        entry_key = (journal.c.account_id == account, journal.c.command_id == bind("command_id"))
        of_turn = (journal.c.account_id == account, journal.c.turn_id == bind("turn_id"))
        by_admission = (journal.c.created_at, journal.c.command_id)

        def leaving_for(target: JournalStatus) -> sa.ColumnElement[bool]:
            return among(journal.c.status, journal_rules.journal_sources(target))

        settle_values = {
            "status": bind("status"),
            "outcome": bind("outcome"),
            "completed_at": bind("completed_at", journal.c.completed_at.type),
        }
        return cls(
            journal_insert=c(
                "journal_insert",
                sql.insert(journal)
                .values(values_of(journal, "outcome", "completed_at"))
                .on_conflict_do_nothing()
                .returning(journal.c.command_id),
            ),
            journal_get=c("journal_get", sa.select(journal).where(*entry_key)),
            journal_get_by_key=c(
                "journal_get_by_key",
                sa.select(journal).where(
                    journal.c.account_id == account,
                    journal.c.idempotency_key == bind("idempotency_key"),
                ),
            ),
            journal_of_turn=c(
                "journal_of_turn", sa.select(journal).where(*of_turn).order_by(*by_admission)
            ),
            journal_unsettled_of_turn=c(
                "journal_unsettled_of_turn",
                sa.select(journal)
                .where(*of_turn, among(journal.c.status, journal_rules.UNSETTLED_JOURNAL))
                .order_by(*by_admission),
            ),
            journal_start=c(
                "journal_start",
                sa.update(journal)
                .where(*entry_key, leaving_for(JournalStatus.EXECUTING))
                .values(status=JournalStatus.EXECUTING.value)
                .returning(*journal.c),
            ),
            journal_settle=MappingProxyType(
                {
                    status: c(
                        f"journal_settle_{status.value}",
                        sa.update(journal)
                        .where(*entry_key, leaving_for(status))
                        .values(settle_values)
                        .returning(*journal.c),
                    )
                    for status in sorted(journal_rules.JOURNAL_SETTLEMENTS)
                }
            ),
        )


class SqlJournal(CommandJournal):
    def __init__(self, core: SqlCore) -> None:
        super().__init__(core.faults)
        self._core = core
        self._st = core.sql.statements(JournalStatements)

    async def _get(self, account_id: str, command_id: str) -> JournalEntry:
        key = {"account_id": account_id, "command_id": command_id}
        return self._core.codec.entry(await self._core.fetch_one(self._st.journal_get, key))

    async def _get_by_key(self, account_id: str, idempotency_key: str) -> JournalEntry:
        key = {"account_id": account_id, "idempotency_key": idempotency_key}
        return self._core.codec.entry(await self._core.fetch_one(self._st.journal_get_by_key, key))

    async def _for_turn(
        self, account_id: str, turn_id: str, *, unsettled: bool
    ) -> tuple[JournalEntry, ...]:
        statement = self._st.journal_unsettled_of_turn if unsettled else self._st.journal_of_turn
        rows = await self._core.fetch(statement, {"account_id": account_id, "turn_id": turn_id})
        return self._core.codec.entries(rows)

    async def _begin(self, entry: JournalEntry) -> JournalAdmission:
        (admission,) = await self._core.write([self.begin_step(entry)])
        return admission  # type: ignore[no-any-return]

    def begin_step(self, entry: JournalEntry) -> Step:
        """Insert unless the key or the command id is taken; a taken key is judged by
        `journal_rules.readmit` on the entry read back by key, and a free key means the id was
        taken."""

        async def judge(result: Result | None, prior: Row | None) -> JournalAdmission:
            assert result is not None
            if result.rows:
                return Fresh(entry=entry)
            if prior is None:
                raise journal_rules.command_id_taken()
            return journal_rules.readmit(self._core.codec.entry(prior), entry)

        key = {"account_id": entry.account_id, "idempotency_key": entry.idempotency_key}
        params = self._core.codec.entry_params(entry)
        return Step(self._st.journal_insert, params, judge, self._st.journal_get_by_key, key)

    async def _mark_executing(self, account_id: str, command_id: str) -> JournalEntry:
        (entry,) = await self._core.write([self.start_step(account_id, command_id)])
        return entry  # type: ignore[no-any-return]

    def start_step(self, account_id: str, command_id: str) -> Step:
        key = {"account_id": account_id, "command_id": command_id}
        return self._core.cas(
            self._st.journal_start,
            key,
            self._st.journal_get,
            key,
            self._core.codec.entry,
            journal_rules.start,
        )

    def complete_steps(
        self, account_id: str, command_id: str, outcome: CommandOutcome
    ) -> list[Step]:
        target = JournalStatus.for_outcome(outcome)
        key = {"account_id": account_id, "command_id": command_id}
        params = {
            **key,
            "status": target.value,
            "outcome": self._core.codec.outcome(outcome),
            "completed_at": self._core.now(),
        }
        return [
            self._core.cas(
                self._st.journal_settle[target],
                params,
                self._st.journal_get,
                key,
                self._core.codec.entry,
                lambda entry: journal_rules.complete(entry, outcome),
            )
        ]

    async def _complete(
        self, account_id: str, command_id: str, outcome: CommandOutcome
    ) -> JournalEntry:
        (entry,) = await self._core.write(self.complete_steps(account_id, command_id, outcome))
        return entry  # type: ignore[no-any-return]
