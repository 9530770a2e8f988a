"""The interactions role in memory: cards, their case and conversation indexes, the blocking
slot of each case and the cards due to expire."""

from __future__ import annotations

from turnframe_core.cases import CaseKey
from turnframe_core.interactions import Interaction, InteractionStatus
from turnframe_store.memory.engine import MemoryRole
from turnframe_store.memory.state import Key3, UndoLog
from turnframe_store.records import InteractionFinish
from turnframe_store.roles import interactions as card_rules
from turnframe_store.roles import rules
from turnframe_store.roles.interactions import InteractionStore
from turnframe_store.roles.rules import Verdict

__all__ = ["MemoryInteractions", "case_of"]


def case_of(card: Interaction) -> Key3:
    """The key of the card's case in the engine's tables."""
    return (card.account_id, card.case_ref.workflow, card.case_ref.case_id)


class MemoryInteractions(MemoryRole, InteractionStore):
    """The hooks of `InteractionStore` on the engine's tables; the `*_in` writes are the ones a
    commit bundle applies on its own undo log."""

    def card(self, account_id: str, interaction_id: str) -> Interaction:
        return rules.found(self.engine.t.cards.get((account_id, interaction_id)))

    def cards_of_case(self, account_id: str, case_key: CaseKey) -> list[Interaction]:
        t = self.engine.t
        ids = t.cards_by_case.get((account_id, case_key.workflow, case_key.case_id), ())
        cards = [t.cards[(account_id, interaction_id)] for interaction_id in ids]
        return sorted(cards, key=card_rules.by_creation)

    def move_card(self, undo: UndoLog, card: Interaction) -> Interaction:
        """Store the card as moved, and leave the indexes of open cards once it is closed."""
        t = self.engine.t
        key = (card.account_id, card.interaction_id)
        undo.put(t.cards, key, card)
        if card.status not in card_rules.OPEN_CARD_STATUSES:
            case = case_of(card)
            if t.blocking_slot.get(case) == card.interaction_id:
                undo.remove(t.blocking_slot, case)
            undo.remove(t.cards_expiring, key)
        return card

    async def _get(self, account_id: str, interaction_id: str) -> Interaction:
        return await self.engine.read(lambda: self.card(account_id, interaction_id))

    async def _open_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[Interaction, ...]:
        def read() -> tuple[Interaction, ...]:
            t = self.engine.t
            ids = t.cards_by_conversation.get((account_id, conversation_id), ())
            cards = [t.cards[(account_id, interaction_id)] for interaction_id in ids]
            opened = [card for card in cards if card.status in card_rules.OPEN_CARD_STATUSES]
            return tuple(sorted(opened, key=card_rules.by_creation))

        return await self.engine.read(read)

    async def _for_case(self, account_id: str, case_key: CaseKey) -> tuple[Interaction, ...]:
        return await self.engine.read(lambda: tuple(self.cards_of_case(account_id, case_key)))

    async def _insert(self, interaction: Interaction) -> Interaction:
        return await self.engine.write(lambda undo: self.insert_in(undo, interaction))

    def insert_in(self, undo: UndoLog, card: Interaction) -> Interaction:
        t = self.engine.t
        card_rules.new_card(card)
        key = (card.account_id, card.interaction_id)
        stored = t.cards.get(key)
        if stored is not None:
            return card_rules.reinsert(stored, card)
        case = case_of(card)
        card_rules.blocking_slot(card, t.blocking_slot.get(case))
        undo.put(t.cards, key, card)
        undo.index(t.cards_by_case, case, card.interaction_id)
        conversation = (card.account_id, card.conversation_id)
        undo.index(t.cards_by_conversation, conversation, card.interaction_id)
        if card.blocking:
            undo.put(t.blocking_slot, case, card.interaction_id)
        if card.expires_at is not None:
            undo.put(t.cards_expiring, key, None)
        return card

    async def _insert_replacing_blocking(self, interaction: Interaction) -> tuple[str, ...]:
        def write(undo: UndoLog) -> tuple[str, ...]:
            t = self.engine.t
            replaced: tuple[str, ...] = ()
            holder_id = t.blocking_slot.get(case_of(interaction)) if interaction.blocking else None
            if holder_id is not None and holder_id != interaction.interaction_id:
                holder = t.cards[(interaction.account_id, holder_id)]
                card_rules.replace_holder(holder)
                at = self.engine.clock()
                self.move_card(undo, holder.transition(InteractionStatus.INVALIDATED, at=at))
                replaced = (holder_id,)
            self.insert_in(undo, interaction)
            return replaced

        return await self.engine.write(write)

    async def _begin_resolution(
        self, account_id: str, interaction_id: str, option_id: str
    ) -> Interaction:
        def write(undo: UndoLog) -> Interaction:
            card = self.card(account_id, interaction_id)
            card_rules.claim(card, option_id)
            at = self.engine.clock()
            claimed = card.transition(InteractionStatus.RESOLVING, at=at, option_id=option_id)
            return self.move_card(undo, claimed)

        return await self.engine.write(write)

    async def _finish(self, account_id: str, settled: InteractionFinish) -> Interaction:
        return await self.engine.write(lambda undo: self.finish_in(undo, account_id, settled))

    def finish_in(self, undo: UndoLog, account_id: str, settled: InteractionFinish) -> Interaction:
        card = self.card(account_id, settled.interaction_id)
        if card_rules.finish(card, settled) is Verdict.REPEAT:
            return card
        at, option_id = self.engine.clock(), card.resolved_option_id
        moved = card.transition(
            settled.status, at=at, option_id=option_id, event_ids=settled.event_ids
        )
        return self.move_card(undo, moved)

    async def _close(
        self,
        account_id: str,
        interaction_id: str,
        status: InteractionStatus,
        option_id: str | None,
    ) -> Interaction:
        def write(undo: UndoLog) -> Interaction:
            card = self.card(account_id, interaction_id)
            if card_rules.close(card, status, option_id) is Verdict.REPEAT:
                return card
            at = self.engine.clock()
            return self.move_card(undo, card.transition(status, at=at, option_id=option_id))

        return await self.engine.write(write)

    async def _invalidate(
        self, account_id: str, case_key: CaseKey, current_revision: int | None
    ) -> tuple[str, ...]:
        return await self.engine.write(
            lambda undo: self.invalidate_in(undo, account_id, case_key, current_revision)
        )

    def invalidate_in(
        self, undo: UndoLog, account_id: str, case_key: CaseKey, current_revision: int | None
    ) -> tuple[str, ...]:
        invalidated: list[str] = []
        for card in self.cards_of_case(account_id, case_key):
            if card_rules.stale(card, current_revision):
                at = self.engine.clock()
                self.move_card(undo, card.transition(InteractionStatus.INVALIDATED, at=at))
                invalidated.append(card.interaction_id)
        return tuple(invalidated)

    async def _expire_due(self, now: int, limit: int) -> tuple[Interaction, ...]:
        def write(undo: UndoLog) -> tuple[Interaction, ...]:
            t = self.engine.t
            cards = (t.cards[key] for key in t.cards_expiring)
            due = [card for card in cards if card_rules.due_to_expire(card, now)]
            due.sort(key=card_rules.by_expiry)
            return tuple(
                self.move_card(undo, card.transition(InteractionStatus.EXPIRED, at=now))
                for card in due[:limit]
            )

        return await self.engine.write(write)
