"""The command journal role in memory: entries by command id, by idempotency key and by turn."""

from __future__ import annotations

from turnframe_core.replay import CommandOutcome
from turnframe_store.memory.engine import MemoryRole
from turnframe_store.memory.state import UndoLog
from turnframe_store.records import Fresh, JournalAdmission, JournalEntry, JournalStatus
from turnframe_store.roles import journal as journal_rules
from turnframe_store.roles import rules
from turnframe_store.roles.journal import CommandJournal
from turnframe_store.roles.rules import Verdict

__all__ = ["MemoryJournal"]


class MemoryJournal(MemoryRole, CommandJournal):
    """The hooks of `CommandJournal` on the engine's tables; the `*_in` writes are the ones a
    commit bundle applies on its own undo log."""

    def entry(self, account_id: str, command_id: str) -> JournalEntry:
        return rules.found(self.engine.t.journal.get((account_id, command_id)))

    async def _get(self, account_id: str, command_id: str) -> JournalEntry:
        return await self.engine.read(lambda: self.entry(account_id, command_id))

    async def _get_by_key(self, account_id: str, idempotency_key: str) -> JournalEntry:
        def read() -> JournalEntry:
            by_key = self.engine.t.journal_by_key.get((account_id, idempotency_key))
            return self.entry(account_id, rules.found(by_key))

        return await self.engine.read(read)

    async def _for_turn(
        self, account_id: str, turn_id: str, *, unsettled: bool
    ) -> tuple[JournalEntry, ...]:
        def read() -> tuple[JournalEntry, ...]:
            t = self.engine.t
            ids = t.journal_by_turn.get((account_id, turn_id), ())
            entries = sorted(
                (t.journal[(account_id, command_id)] for command_id in ids),
                key=lambda e: (e.created_at, e.command_id),
            )
            if unsettled:
                return tuple(e for e in entries if e.status in journal_rules.UNSETTLED_JOURNAL)
            return tuple(entries)

        return await self.engine.read(read)

    async def _begin(self, entry: JournalEntry) -> JournalAdmission:
        return await self.engine.write(lambda undo: self.begin_in(undo, entry))

    def begin_in(self, undo: UndoLog, entry: JournalEntry) -> JournalAdmission:
        t = self.engine.t
        account_id = entry.account_id
        stored_id = t.journal_by_key.get((account_id, entry.idempotency_key))
        if stored_id is not None:
            return journal_rules.readmit(t.journal[(account_id, stored_id)], entry)
        key = (account_id, entry.command_id)
        if key in t.journal:
            raise journal_rules.command_id_taken()
        undo.put(t.journal, key, entry)
        undo.put(t.journal_by_key, (account_id, entry.idempotency_key), entry.command_id)
        undo.index(t.journal_by_turn, (account_id, entry.turn_id), entry.command_id)
        return Fresh(entry=entry)

    async def _mark_executing(self, account_id: str, command_id: str) -> JournalEntry:
        return await self.engine.write(
            lambda undo: self.mark_executing_in(undo, account_id, command_id)
        )

    def mark_executing_in(self, undo: UndoLog, account_id: str, command_id: str) -> JournalEntry:
        entry = self.entry(account_id, command_id)
        if journal_rules.start(entry) is Verdict.REPEAT:
            return entry
        moved = entry.model_copy(update={"status": JournalStatus.EXECUTING})
        undo.put(self.engine.t.journal, (account_id, command_id), moved)
        return moved

    async def _complete(
        self, account_id: str, command_id: str, outcome: CommandOutcome
    ) -> JournalEntry:
        return await self.engine.write(
            lambda undo: self.complete_in(undo, account_id, command_id, outcome)
        )

    def complete_in(
        self, undo: UndoLog, account_id: str, command_id: str, outcome: CommandOutcome
    ) -> JournalEntry:
        entry = self.entry(account_id, command_id)
        if journal_rules.complete(entry, outcome) is Verdict.REPEAT:
            return entry
        settled = entry.settled(outcome, at=self.engine.clock())
        undo.put(self.engine.t.journal, (account_id, command_id), settled)
        return settled
