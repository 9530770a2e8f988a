"""The conversations role in memory: conversations, turns, phase markers and stream logs."""

from __future__ import annotations

from turnframe_core.replay import TurnPhase
from turnframe_core.turn import AssistantTurn
from turnframe_store.errors import Conflict, NotFound
from turnframe_store.memory.engine import MemoryRole
from turnframe_store.memory.state import UndoLog
from turnframe_store.records import ConversationRecord, PhaseMarker, UserTurnRecord
from turnframe_store.roles import conversations as turn_rules
from turnframe_store.roles import rules
from turnframe_store.roles.conversations import ConversationStore, StreamEntry
from turnframe_store.roles.rules import Verdict

__all__ = ["MemoryConversations"]


class MemoryConversations(MemoryRole, ConversationStore):
    """The hooks of `ConversationStore` on the engine's tables; the `*_in` writes are the ones a
    commit bundle applies on its own undo log."""

    async def _get_conversation(self, account_id: str, conversation_id: str) -> ConversationRecord:
        t = self.engine.t
        return rules.found(
            await self.engine.read(lambda: t.conversations.get((account_id, conversation_id)))
        )

    async def _get_user_turn(self, account_id: str, turn_id: str) -> UserTurnRecord:
        t = self.engine.t
        return rules.found(await self.engine.read(lambda: t.user_turns.get((account_id, turn_id))))

    async def _get_assistant_turn(self, account_id: str, turn_id: str) -> AssistantTurn:
        t = self.engine.t
        text = await self.engine.read(lambda: t.assistant_turns.get((account_id, turn_id)))
        return turn_rules.reload_answer(rules.found(text))

    async def _list_turns(
        self, account_id: str, conversation_id: str
    ) -> tuple[UserTurnRecord, ...]:
        return await self.engine.read(lambda: self.turns_of(account_id, conversation_id))

    def turns_of(self, account_id: str, conversation_id: str) -> tuple[UserTurnRecord, ...]:
        t = self.engine.t
        ids = t.turns_by_conversation.get((account_id, conversation_id), ())
        turns = [t.user_turns[(account_id, turn_id)] for turn_id in ids]
        return tuple(sorted(turns, key=lambda r: (r.received_at, r.turn_id)))

    async def _recent_turns(
        self, account_id: str, conversation_id: str, limit: int
    ) -> tuple[str, ...]:
        def read() -> tuple[str, ...]:
            texts: list[str] = []
            for record in reversed(self.turns_of(account_id, conversation_id)):
                text = self.engine.t.assistant_turns.get((account_id, record.turn_id))
                if text is not None:
                    texts.append(text)
                    if len(texts) == limit:
                        break
            return tuple(reversed(texts))

        return await self.engine.read(read)

    async def _feed(
        self, account_id: str, conversation_id: str, after_position: int, limit: int
    ) -> tuple[tuple[int, str, str | None], ...]:
        def read() -> tuple[tuple[int, str, str | None], ...]:
            t = self.engine.t
            chain = t.audit_chain.get((account_id, conversation_id), [])
            start = after_position + 1  # a link's position is its index in the chain
            return tuple(
                (link.position, link.turn_id, t.assistant_turns.get((account_id, link.turn_id)))
                for link in chain[start : start + limit]
            )

        return await self.engine.read(read)

    async def _get_phase(self, account_id: str, turn_id: str) -> PhaseMarker:
        t = self.engine.t
        return rules.found(await self.engine.read(lambda: t.phases.get((account_id, turn_id))))

    async def _list_unfinished_turns(self, limit: int) -> tuple[PhaseMarker, ...]:
        def read() -> tuple[PhaseMarker, ...]:
            t = self.engine.t
            markers = [t.phases[key] for key in t.unfinished]
            markers.sort(key=lambda m: (m.updated_at, m.account_id, m.turn_id))
            return tuple(markers[:limit])

        return await self.engine.read(read)

    async def _ensure_conversation(
        self, account_id: str, conversation_id: str
    ) -> ConversationRecord:
        return await self.engine.write(
            lambda undo: self.ensure_conversation_in(undo, account_id, conversation_id)
        )

    def ensure_conversation_in(
        self, undo: UndoLog, account_id: str, conversation_id: str
    ) -> ConversationRecord:
        key = (account_id, conversation_id)
        found = self.engine.t.conversations.get(key)
        if found is not None:
            return found
        record = turn_rules.new_conversation(account_id, conversation_id, self.engine.clock())
        undo.put(self.engine.t.conversations, key, record)
        return record

    async def _append_user_turn(self, record: UserTurnRecord) -> None:
        await self.engine.write(lambda undo: self.append_user_turn_in(undo, record))

    def append_user_turn_in(self, undo: UndoLog, record: UserTurnRecord) -> None:
        t = self.engine.t
        conversation = (record.account_id, record.conversation_id)
        if conversation not in t.conversations:
            raise NotFound()
        key = (record.account_id, record.turn_id)
        if key in t.user_turns:
            raise Conflict("the turn is already recorded")
        undo.put(t.user_turns, key, record)
        undo.index(t.turns_by_conversation, conversation, record.turn_id)
        marker = PhaseMarker(
            account_id=record.account_id,
            conversation_id=record.conversation_id,
            turn_id=record.turn_id,
            phase=TurnPhase.RECEIVED,
            updated_at=self.engine.clock(),
        )
        undo.put(t.phases, key, marker)
        undo.put(t.unfinished, key, None)

    async def _append_assistant_turn(
        self, account_id: str, turn: AssistantTurn, phase: TurnPhase | None
    ) -> None:
        await self.engine.write(
            lambda undo: self.append_assistant_turn_in(undo, account_id, turn, phase)
        )

    def append_assistant_turn_in(
        self, undo: UndoLog, account_id: str, turn: AssistantTurn, phase: TurnPhase | None
    ) -> None:
        t = self.engine.t
        key = (account_id, turn.turn_id)
        user = t.user_turns.get(key)
        conversation_id = None if user is None else user.conversation_id
        text = turn_rules.answer(turn, conversation_id, t.assistant_turns.get(key))
        if text is not None:
            undo.put(t.assistant_turns, key, text)
        if phase is not None:
            self.set_phase_in(undo, account_id, turn.turn_id, phase)

    async def _set_phase(self, account_id: str, turn_id: str, phase: TurnPhase) -> PhaseMarker:
        return await self.engine.write(
            lambda undo: self.set_phase_in(undo, account_id, turn_id, phase)
        )

    def set_phase_in(
        self, undo: UndoLog, account_id: str, turn_id: str, phase: TurnPhase
    ) -> PhaseMarker:
        t = self.engine.t
        key = (account_id, turn_id)
        marker = rules.found(t.phases.get(key))
        if turn_rules.move_phase(marker, phase) is Verdict.REPEAT:
            return marker
        moved = marker.model_copy(update={"phase": phase, "updated_at": self.engine.clock()})
        undo.put(t.phases, key, moved)
        if phase in turn_rules.TERMINAL_PHASES:
            undo.remove(t.unfinished, key)
        return moved

    async def _stream_events(
        self, account_id: str, turn_id: str, after_sequence: int, limit: int
    ) -> tuple[str, ...]:
        def read() -> tuple[str, ...]:
            log = self.engine.t.stream.get((account_id, turn_id), [])
            start = max(after_sequence, 0)
            return tuple(entry.text for entry in log[start : start + limit])

        return await self.engine.read(read)

    async def _stream_tail(self, account_id: str, turn_id: str) -> str | None:
        def read() -> str | None:
            log = self.engine.t.stream.get((account_id, turn_id))
            return log[-1].text if log else None

        return await self.engine.read(read)

    async def _append_stream_events(
        self, account_id: str, entries: tuple[StreamEntry, ...]
    ) -> None:
        turn_id = entries[0].turn_id
        await self.engine.write(
            lambda undo: self.append_stream_events_in(undo, account_id, turn_id, entries)
        )

    def append_stream_events_in(
        self, undo: UndoLog, account_id: str, turn_id: str, entries: tuple[StreamEntry, ...]
    ) -> None:
        t = self.engine.t
        key = (account_id, turn_id)
        if key not in t.user_turns:
            raise NotFound()
        log = t.stream.get(key, [])
        low, high = turn_rules.stream_window(entries)
        known = turn_rules.stream_append(entries, log[max(low - 1, 0) : high])
        for entry in entries[known:]:
            undo.index(t.stream, key, entry)

    async def _prune_stream_events(self, finished_before: int, limit: int) -> int:
        def write(undo: UndoLog) -> int:
            t = self.engine.t
            ended = sorted(
                (log[-1].at, key)
                for key, log in t.stream.items()
                if log
                and log[-1].terminal
                and log[-1].at < finished_before
                and _turn_ended(t.phases.get(key))
            )[:limit]
            for _, key in ended:
                undo.remove(t.stream, key)
            return len(ended)

        return await self.engine.write(write)


def _turn_ended(marker: PhaseMarker | None) -> bool:
    """Whether the turn's marker is terminal (a log is pruned only once its turn ended)."""
    return marker is not None and marker.phase in turn_rules.TERMINAL_PHASES
