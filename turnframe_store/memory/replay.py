"""The replay records role in memory: records by turn, token and conversation, and each
conversation's audit chain."""

from __future__ import annotations

from turnframe_core.audit_chain import ChainLink
from turnframe_core.replay import ReplayRecord
from turnframe_store.memory.engine import MemoryRole
from turnframe_store.memory.state import UndoLog
from turnframe_store.roles import replay as replay_rules
from turnframe_store.roles import rules
from turnframe_store.roles.replay import ReplayStore
from turnframe_store.roles.rules import Verdict

__all__ = ["MemoryReplay"]


class MemoryReplay(MemoryRole, ReplayStore):
    """The hooks of `ReplayStore` on the engine's tables; `put_in` is the write a commit bundle
    applies on its own undo log."""

    def record(self, account_id: str, turn_id: str) -> ReplayRecord:
        return rules.found(self.engine.t.replay.get((account_id, turn_id)))

    def _by_first_put(self, account_id: str, conversation_id: str) -> list[str]:
        """The conversation's turn ids in list order: (recorded_at of the first put, turn_id)."""
        t = self.engine.t
        turns = t.replay_by_conversation.get((account_id, conversation_id), ())
        return sorted(turns, key=lambda turn: (t.replay_first_put[(account_id, turn)], turn))

    async def _get(self, account_id: str, turn_id: str) -> ReplayRecord:
        return await self.engine.read(lambda: self.record(account_id, turn_id))

    async def _get_by_token(self, account_id: str, replay_token: str) -> ReplayRecord:
        def read() -> ReplayRecord:
            turn_id = self.engine.t.replay_by_token.get((account_id, replay_token))
            return self.record(account_id, rules.found(turn_id))

        return await self.engine.read(read)

    async def _unerased_before(self, before: int, limit: int) -> tuple[tuple[str, str], ...]:
        def read() -> tuple[tuple[str, str], ...]:
            t = self.engine.t
            held = sorted(
                (record.erased_at is not None, record.recorded_at, key)
                for key, record in t.replay.items()
                if record.phase.is_terminal
                and record.recorded_at < before
                and key not in t.replay_erased
            )
            return tuple(key for *_, key in held[:limit])

        return await self.engine.read(read)

    async def _for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[ReplayRecord, ...]:
        def read() -> tuple[ReplayRecord, ...]:
            ordered = self._by_first_put(account_id, conversation_id)
            return tuple(self.engine.t.replay[(account_id, turn_id)] for turn_id in ordered)

        return await self.engine.read(read)

    async def _last_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> ReplayRecord | None:
        def read() -> ReplayRecord | None:
            t = self.engine.t
            turns = t.replay_by_conversation.get((account_id, conversation_id), ())
            if not turns:
                return None
            last = max(turns, key=lambda turn: (t.replay_first_put[(account_id, turn)], turn))
            return t.replay[(account_id, last)]

        return await self.engine.read(read)

    async def _put(self, record: ReplayRecord) -> None:
        await self.engine.write(lambda undo: self.put_in(undo, record))

    def put_in(self, undo: UndoLog, record: ReplayRecord) -> None:
        t = self.engine.t
        replay_rules.derived_token(record)
        key = (record.account_id, record.turn_id)
        conversation = (record.account_id, record.conversation_id)
        stored = t.replay.get(key)
        if stored is None:
            undo.put(t.replay, key, record)
            undo.put(t.replay_first_put, key, record.recorded_at)
            undo.put(t.replay_by_token, (record.account_id, record.replay_token), record.turn_id)
            undo.index(t.replay_by_conversation, conversation, record.turn_id)
        elif replay_rules.put_replay(stored, record) is Verdict.MOVE:
            undo.put(t.replay, key, record)
        if record.phase.is_terminal and key not in t.audit_linked:
            chain = t.audit_chain.get(conversation, [])
            undo.index(
                t.audit_chain, conversation, ChainLink.after(chain[-1] if chain else None, record)
            )
            undo.put(t.audit_linked, key, None)

    async def _chain(self, account_id: str, conversation_id: str) -> tuple[ChainLink, ...]:
        t = self.engine.t
        return await self.engine.read(
            lambda: tuple(t.audit_chain.get((account_id, conversation_id), ()))
        )

    async def _accounts_with_token(self, replay_token: str) -> tuple[str, ...]:
        t = self.engine.t
        return await self.engine.read(
            lambda: tuple(sorted({a for (a, token) in t.replay_by_token if token == replay_token}))
        )

    async def _accounts_with_conversation(self, conversation_id: str) -> tuple[str, ...]:
        t = self.engine.t
        return await self.engine.read(
            lambda: tuple(
                sorted({a for (a, c) in t.replay_by_conversation if c == conversation_id})
            )
        )
