"""The interactions role (cards): its contract and the judges its stores apply; the card status
sets come from the core's status machine (`can_transition`).
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Final

from turnframe_core.cases import CaseKey
from turnframe_core.interactions import Interaction, InteractionStatus, can_transition
from turnframe_store.errors import Conflict, InvalidRecord
from turnframe_store.faults import FaultPoint
from turnframe_store.records import (
    FINISH_STATUSES,
    InteractionFinish,
)
from turnframe_store.roles import rules
from turnframe_store.roles.rules import Role, Verdict

OPEN_CARD_STATUSES: Final = frozenset(status for status in InteractionStatus if status.is_open)


#: Where a resolving card may go: what a finish settles it into (`InteractionFinish` checks
#: the same set).
SETTLEMENTS: Final = FINISH_STATUSES


#: The card fields that move; everything else is the card as created and never changes.
CARD_LIFECYCLE: Final = frozenset(
    {"status", "resolved_at", "resolved_option_id", "resolution_event_ids"}
)


@functools.cache
def card_sources(target: InteractionStatus) -> frozenset[InteractionStatus]:
    """The statuses a card may leave for `target` (the core's status machine)."""
    return frozenset(status for status in InteractionStatus if can_transition(status, target))


def new_card(card: Interaction) -> None:
    if card.status is not InteractionStatus.ACTIVE:
        raise InvalidRecord("a new card is active")
    if card.resolved_at is not None or card.resolved_option_id or card.resolution_event_ids:
        raise InvalidRecord("a new card carries no resolution")


def reinsert(stored: Interaction, card: Interaction) -> Interaction:
    """Inserting a stored card's id again: the same card (lifecycle aside) gives the stored one,
    unchanged (never reactivated); another card is `Conflict`."""
    if stored.model_dump(exclude=set(CARD_LIFECYCLE)) == card.model_dump(
        exclude=set(CARD_LIFECYCLE)
    ):
        return stored
    raise Conflict("another card is stored under this id")


def blocking_slot(card: Interaction, holder: str | None) -> None:
    """One open blocking card per case: `holder` is the id of the case's open blocking card."""
    if card.blocking and holder is not None:
        raise Conflict("the case already has an open blocking card")


def replace_holder(holder: Interaction) -> None:
    """Only an active blocking card is replaced (invalidated); one being resolved is not."""
    if holder.status not in card_sources(InteractionStatus.INVALIDATED):
        raise Conflict("the case's blocking card is being resolved")


def offered(card: Interaction, option_id: str | None) -> None:
    if option_id is not None and card.payload.option(option_id) is None:
        raise InvalidRecord("the card does not offer this option")


def claim(card: Interaction, option_id: str) -> Verdict:
    """begin_resolution: one of the card's options, on an active card; a repeat is `Conflict`
    (a card has one winner)."""
    offered(card, option_id)
    if card.status not in card_sources(InteractionStatus.RESOLVING):
        raise Conflict("the card is not active")
    return Verdict.MOVE


def finish(card: Interaction, settled: InteractionFinish) -> Verdict:
    """Settle a resolving card (with the claimed option, when one is named); the same
    settlement again is a repeat."""
    status, option_id = settled.status, settled.option_id
    if card.status in card_sources(status):
        if option_id is not None and option_id != card.resolved_option_id:
            raise Conflict("another option was claimed")
        return Verdict.MOVE
    if card.status is status and (
        status is InteractionStatus.ACTIVE
        or (
            option_id in (None, card.resolved_option_id)
            and (
                status is InteractionStatus.FAILED or settled.event_ids == card.resolution_event_ids
            )
        )
    ):
        return Verdict.REPEAT
    raise Conflict("the card is settled otherwise")


def close(card: Interaction, status: InteractionStatus, option_id: str | None) -> Verdict:
    """Decline or dismiss an active card; the same close again is a repeat."""
    if card.status in card_sources(status):
        offered(card, option_id)
        return Verdict.MOVE
    if card.status is status and option_id in (None, card.resolved_option_id):
        return Verdict.REPEAT
    raise Conflict("the card is not active")


def stale(card: Interaction, current_revision: int | None) -> bool:
    """Invalidated when its case moves: an active card bound to another revision (revision-
    independent cards are spared); with no revision (administrative), every active card."""
    if card.status not in card_sources(InteractionStatus.INVALIDATED):
        return False
    if current_revision is None:
        return True
    return not (card.revision_independent or card.bound_revision == current_revision)


def by_creation(card: Interaction) -> tuple[int, str]:
    """The order of a conversation's or a case's cards (and of invalidated ids)."""
    return (card.created_at, card.interaction_id)


def by_expiry(card: Interaction) -> tuple[int, str, str]:
    """The order of the expiry sweep, across accounts."""
    return (card.expires_at or 0, card.account_id, card.interaction_id)


def due_to_expire(card: Interaction, now: int) -> bool:
    return (
        card.status in card_sources(InteractionStatus.EXPIRED)
        and card.expires_at is not None
        and card.expires_at <= now
    )


def settlement(value: str) -> InteractionStatus:
    """The status a finish settles a card into: one a resolving card may move to."""
    try:
        status = InteractionStatus(value)
    except ValueError:
        raise InvalidRecord("not a card status") from None
    if status not in SETTLEMENTS:
        raise InvalidRecord("a finish settles a card as resolved, failed or active")
    return status


class InteractionReader(Role, ABC):
    """The reading half of the interactions role."""

    async def get(self, account_id: str, interaction_id: str) -> Interaction:
        """The card with its current lifecycle fields, or `NotFound`."""
        rules.text(account_id, interaction_id)
        return await self._get(account_id, interaction_id)

    async def open_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[Interaction, ...]:
        """The conversation's active and resolving cards, sorted by (created_at, interaction_id)."""
        rules.text(account_id, conversation_id)
        return await self._open_for_conversation(account_id, conversation_id)

    async def for_case(self, account_id: str, case_key: CaseKey) -> tuple[Interaction, ...]:
        """Every card of the case in any status, sorted by (created_at, interaction_id)."""
        rules.text(account_id)
        rules.case(case_key)
        return await self._for_case(account_id, case_key)

    @abstractmethod
    async def _get(self, account_id: str, interaction_id: str) -> Interaction: ...

    @abstractmethod
    async def _open_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[Interaction, ...]: ...

    @abstractmethod
    async def _for_case(self, account_id: str, case_key: CaseKey) -> tuple[Interaction, ...]: ...


class InteractionWriter(Role, ABC):
    """The writing half of the interactions role."""

    async def insert(self, interaction: Interaction) -> Interaction:
        """Persist a new active card.

        A second open (active or resolving) blocking card for the same case is `Conflict`. The
        same card again (equal in everything but lifecycle fields) is accepted and returned as
        stored; a different card under a stored id is `Conflict`.
        """
        rules.record_keys(interaction)
        stored = await self._insert(interaction)
        self._faults.reach(FaultPoint.AFTER_INTERACTION_PERSISTENCE)
        return stored

    async def insert_replacing_blocking(self, interaction: Interaction) -> tuple[str, ...]:
        """Invalidate the case's active blocking card, then insert; return the replaced ids.

        A resolving blocking card cannot be replaced (`Conflict`, nothing written).
        """
        rules.record_keys(interaction)
        replaced = await self._insert_replacing_blocking(interaction)
        self._faults.reach(FaultPoint.AFTER_INTERACTION_PERSISTENCE)
        return replaced

    async def begin_resolution(
        self, account_id: str, interaction_id: str, option_id: str
    ) -> Interaction:
        """Claim an active card for an answer (active -> resolving). Exactly one caller wins; any
        other gets `Conflict`. An option the card does not offer is `InvalidRecord`."""
        rules.text(account_id, interaction_id, option_id)
        return await self._begin_resolution(account_id, interaction_id, option_id)

    async def finish(
        self,
        account_id: str,
        interaction_id: str,
        status: InteractionStatus,
        option_id: str | None = None,
        event_ids: Sequence[str] = (),
    ) -> Interaction:
        """Settle a resolving card as resolved, failed or active (released).

        `option_id`, when given, must be the claimed option. The same settlement again is
        accepted; a different one is `Conflict`.
        """
        events = tuple(event_ids)
        rules.text(account_id, interaction_id, option_id, *events)
        settled = InteractionFinish.model_construct(
            interaction_id=interaction_id,
            status=settlement(status),
            option_id=option_id,
            event_ids=events,
        )
        return await self._finish(account_id, settled)

    async def decline(
        self, account_id: str, interaction_id: str, option_id: str | None = None
    ) -> Interaction:
        """active -> declined; the same decline again is accepted."""
        rules.text(account_id, interaction_id, option_id)
        return await self._close(account_id, interaction_id, InteractionStatus.DECLINED, option_id)

    async def dismiss(self, account_id: str, interaction_id: str) -> Interaction:
        """active -> dismissed; a repeat is accepted."""
        rules.text(account_id, interaction_id)
        return await self._close(account_id, interaction_id, InteractionStatus.DISMISSED, None)

    async def invalidate_for_revision(
        self, account_id: str, case_key: CaseKey, current_revision: int
    ) -> tuple[str, ...]:
        """Invalidate the case's active cards bound to another revision, except revision-
        independent ones; return their ids sorted by (created_at, interaction_id)."""
        rules.text(account_id)
        rules.case(case_key)
        return await self._invalidate(account_id, case_key, rules.whole(current_revision))

    async def invalidate_case_cards(self, account_id: str, case_key: CaseKey) -> tuple[str, ...]:
        """Administrative: invalidate every active card of the case, revision-independent ones
        included; return their ids sorted by (created_at, interaction_id)."""
        rules.text(account_id)
        rules.case(case_key)
        return await self._invalidate(account_id, case_key, None)

    async def expire_due(self, now: int, limit: int) -> tuple[Interaction, ...]:
        """Operator sweep, every account: expire active cards with expires_at <= now, sorted by
        (expires_at, account_id, interaction_id), at most `limit`; return them as expired."""
        return await self._expire_due(rules.instant(now), rules.limit(limit))

    @abstractmethod
    async def _insert(self, interaction: Interaction) -> Interaction:
        """Judge with `new_card`, `reinsert` and `blocking_slot`."""

    @abstractmethod
    async def _insert_replacing_blocking(self, interaction: Interaction) -> tuple[str, ...]: ...

    @abstractmethod
    async def _begin_resolution(
        self, account_id: str, interaction_id: str, option_id: str
    ) -> Interaction: ...

    @abstractmethod
    async def _finish(self, account_id: str, settled: InteractionFinish) -> Interaction:
        """Judge with `finish`, then settle the card."""

    @abstractmethod
    async def _close(
        self,
        account_id: str,
        interaction_id: str,
        status: InteractionStatus,
        option_id: str | None,
    ) -> Interaction:
        """active -> `status` (declined or dismissed)."""

    @abstractmethod
    async def _invalidate(
        self, account_id: str, case_key: CaseKey, current_revision: int | None
    ) -> tuple[str, ...]:
        """The case's stale cards (`stale`), invalidated; their ids in list order."""

    @abstractmethod
    async def _expire_due(self, now: int, limit: int) -> tuple[Interaction, ...]: ...


class InteractionStore(InteractionReader, InteractionWriter):
    """The whole interactions role: what a store implements (the hooks above)."""
