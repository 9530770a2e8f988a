"""Conversation memory for step G: what the last replies asked, offered and showed.

`recall` reads it once, inside durable point 1's transaction (no durable point of its own): the
conversation's last `MEMORY_TURNS` stored replies and the cards they showed as stored now, at
most `MEMORY_ITEMS` of them, so a text turn makes at most 1 + `MEMORY_ITEMS` reads more however
long the conversation. `remember` maps what was recalled onto this turn's handles: a case the
turn issued no handle for (it left the conversation, or the account may no longer reach it) is
named by no handle, so memory never brings a case into a turn that the turn did not load and
authorize.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from pydantic import ValidationError

from turnframe_core.blocks import InteractionBlock
from turnframe_core.cases import CaseKey, CaseRef
from turnframe_core.interactions import Interaction, InteractionStatus, SelectTarget
from turnframe_core.turn import AssistantTurn, Expectation
from turnframe_core.understanding import (
    MEMORY_ITEMS,
    MEMORY_MISSING,
    MEMORY_TURNS,
    CardEnding,
    ConversationMemory,
    RememberedCard,
    RememberedOffer,
    RememberedQuestion,
    RememberedTurn,
)
from turnframe_store.bundle import Stores
from turnframe_store.errors import NotFound

__all__ = ["NOTHING_RECALLED", "Recalled", "recall", "remember"]

_ENDINGS: Mapping[InteractionStatus, CardEnding] = {
    InteractionStatus.ACTIVE: CardEnding.OPEN,
    InteractionStatus.RESOLVING: CardEnding.OPEN,
    InteractionStatus.RESOLVED: CardEnding.ANSWERED,
    InteractionStatus.FAILED: CardEnding.FAILED,
    InteractionStatus.DECLINED: CardEnding.DECLINED,
    InteractionStatus.DISMISSED: CardEnding.DISMISSED,
    InteractionStatus.INVALIDATED: CardEnding.SUPERSEDED,
    InteractionStatus.EXPIRED: CardEnding.EXPIRED,
}


@dataclass(frozen=True)
class Recalled:
    """What `recall` read: the last replies (oldest first) and, by id, the cards they showed."""

    replies: tuple[AssistantTurn, ...] = ()
    cards: Mapping[str, Interaction] = field(default_factory=dict)


NOTHING_RECALLED = Recalled()


def _shown(reply: AssistantTurn) -> list[InteractionBlock]:
    return [block for block in reply.blocks if isinstance(block, InteractionBlock)]


def _newest_first(replies: tuple[AssistantTurn, ...]) -> Iterator[tuple[int, AssistantTurn]]:
    """Each reply with how many replies ago it was (1: the last one)."""
    yield from enumerate(reversed(replies[-MEMORY_TURNS:]), 1)


async def recall(stores: Stores, account_id: str, conversation_id: str) -> Recalled:
    """The conversation's last replies and the cards they showed, as stored now (one bounded
    read of replies, then one per card, at most `MEMORY_ITEMS`)."""
    replies = await stores.conversations.recent_turns(account_id, conversation_id, MEMORY_TURNS)
    wanted: list[str] = []
    for _, reply in _newest_first(replies):
        for block in _shown(reply):
            if block.interaction_id not in wanted and len(wanted) < MEMORY_ITEMS:
                wanted.append(block.interaction_id)
    cards: dict[str, Interaction] = {}
    for interaction_id in wanted:
        try:
            cards[interaction_id] = await stores.interactions.get(account_id, interaction_id)
        except NotFound:  # gone (erased): nothing to remember of it
            continue
    return Recalled(replies, cards)


def remember(recalled: Recalled, handles: Mapping[CaseKey, str], now: int) -> ConversationMemory:
    """`recalled` as this turn's brief may show it at `now`: cases by this turn's `handles`
    (each case's handle) only, newest first, each list cut to its cap."""
    memory = _Memory(handles, now)
    for ago, reply in _newest_first(recalled.replies):
        memory.add(ago, reply, recalled.cards)
    return ConversationMemory(
        open_questions=tuple(memory.questions[:MEMORY_ITEMS]),
        offers=tuple(memory.offers[:MEMORY_ITEMS]),
        cards=tuple(memory.cards[:MEMORY_ITEMS]),
        turns=tuple(memory.turns[:MEMORY_TURNS]),
    )


@dataclass
class _Memory:
    """The lists `remember` fills, reply by reply, newest first."""

    by_case: Mapping[CaseKey, str]
    now: int
    questions: list[RememberedQuestion] = field(default_factory=list)
    offers: list[RememberedOffer] = field(default_factory=list)
    cards: list[RememberedCard] = field(default_factory=list)
    turns: list[RememberedTurn] = field(default_factory=list)

    def handle_of(self, case_ref: CaseRef | None) -> str | None:
        return None if case_ref is None else self.by_case.get(case_ref.key)

    def add(self, ago: int, reply: AssistantTurn, stored: Mapping[str, Interaction]) -> None:
        shown = _shown(reply)
        for expectation, block in _asked(reply.expectations, shown):
            if block is None:  # asked in words: open until the user's next message
                if ago == 1:
                    self._question(ago, expectation, None)
                continue
            card = stored.get(block.interaction_id)
            if card is not None and self._ending(card) is CardEnding.OPEN:  # while its card is
                self._question(ago, expectation, card)
        for offer in reply.offers:
            handle = self.handle_of(offer.case_ref)
            if not any(o.operation == offer.operation and o.handle == handle for o in self.offers):
                with contextlib.suppress(ValidationError):  # a name no workflow declares
                    self.offers.append(
                        RememberedOffer(turns_ago=ago, operation=offer.operation, handle=handle)
                    )
        for block in shown:
            card = stored.get(block.interaction_id)
            if card is not None and all(
                c.interaction_id != card.interaction_id for c in self.cards
            ):
                self.cards.append(self._card(ago, card))
        touched = dict.fromkeys(h for ref in reply.subjects if (h := self.handle_of(ref)))
        if touched:
            self.turns.append(RememberedTurn(turns_ago=ago, handles=tuple(touched)[:MEMORY_ITEMS]))

    def _question(self, ago: int, expectation: Expectation, card: Interaction | None) -> None:
        with contextlib.suppress(ValidationError):  # a name no workflow declares
            self.questions.append(
                RememberedQuestion(
                    turns_ago=ago,
                    kind=expectation.kind,
                    handle=self.handle_of(expectation.case_ref),
                    operation=expectation.operation,
                    missing=expectation.missing[:MEMORY_MISSING],
                    interaction_id=card.interaction_id if card is not None else None,
                )
            )

    def _ending(self, card: Interaction) -> CardEnding:
        """How the card stands: an open card past its expiry can no longer be answered."""
        ending = _ENDINGS[card.status]
        expired = card.expires_at is not None and self.now >= card.expires_at
        return CardEnding.EXPIRED if ending is CardEnding.OPEN and expired else ending

    def _card(self, ago: int, card: Interaction) -> RememberedCard:
        ending = self._ending(card)
        chosen = card.resolved_option_id if ending is not CardEnding.OPEN else None
        selects = {
            option.option_id: self.handle_of(option.action.case_ref)
            for option in card.payload.options
            if isinstance(option.action, SelectTarget)
        }
        return RememberedCard(
            turns_ago=ago,
            interaction_id=card.interaction_id,
            handle=self.handle_of(card.case_ref),
            ending=ending,
            chosen_option=chosen,
            choices=tuple(h for h in selects.values() if h)[:MEMORY_ITEMS],
            chosen_handle=selects.get(chosen) if chosen is not None else None,
        )


def _asked(
    expectations: tuple[Expectation, ...], shown: list[InteractionBlock]
) -> Iterator[tuple[Expectation, InteractionBlock | None]]:
    """Each expectation with the card that asks it: a reply's expectations are its cards', one
    each, in the order shown; a reply whose counts differ links none."""
    linked = len(expectations) == len(shown)
    for index, expectation in enumerate(expectations):
        yield expectation, shown[index] if linked else None
