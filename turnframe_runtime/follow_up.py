"""Steps O and P: re-project the cases the turn touched, then persist the cards they now need.

- Confirmations deferred past the commit (their case changed this turn) are planned again
  against the revision the commit left, so the commit's own invalidation cannot kill the card the
  turn shows.
- One open blocking card per case: the one bound to the current revision is kept (and shown when
  the user answered a card of that case late, or when it is the view's requirement); else the
  view's requirement raises a new card, unless it was answered at this revision ("not now" means
  "ask again when the record changes").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from turnframe_core import codes
from turnframe_core.cases import CaseKey
from turnframe_core.interactions import Interaction, InteractionStatus
from turnframe_core.understanding import Understanding
from turnframe_runtime.cards import CardFactory, RaisedCard, persist_card, requirement_key
from turnframe_runtime.cases import CaseBook, in_key_order
from turnframe_runtime.context import NOTHING, AuditTrail, Noticed, Teller, TurnContext, noticed
from turnframe_runtime.copy import CopyRenderError, MissingCopy
from turnframe_runtime.reduce import CaseInView, PlannedCommand, reduce_on_case
from turnframe_store.bundle import Stores
from turnframe_store.errors import StoreError

__all__ = ["FollowUp"]

_ANSWERED = (InteractionStatus.RESOLVED, InteractionStatus.DECLINED, InteractionStatus.DISMISSED)


@dataclass
class FollowUp:
    """Follow-up work for one turn: `refresh` (O) re-projects from the domain, outside any
    transaction; `raise_cards` (P) writes inside the commit's. Cards it persists join `shown`,
    their cases `touched`; each step returns what it says."""

    turn: TurnContext
    cases: CaseBook
    factory: CardFactory
    tell: Teller
    audit: AuditTrail
    shown: list[Interaction]
    touched: set[CaseKey]
    #: what P said so far (all of it once `raise_cards` returns; a part, if it raised)
    said: list[Noticed] = field(default_factory=list)
    _deferred: list[RaisedCard] = field(default_factory=list)
    _late: set[CaseKey] = field(default_factory=set)

    async def refresh(
        self, answered_late: Iterable[Interaction]
    ) -> tuple[list[CaseInView], Noticed]:
        """O: load again every touched case and every case whose card was answered late; and
        whether some could not be."""
        self._late = {card.case_ref.key for card in answered_late}
        refreshed: list[CaseInView] = []
        said = NOTHING
        for key in in_key_order(self.touched | self._late):
            try:
                case = await self.cases.refresh(key)
            except StoreError:
                said += noticed(codes.NOTICE_CASE_REFRESH_UNAVAILABLE)
                continue
            if case is not None:
                refreshed.append(case)
        return refreshed, said

    async def raise_cards(
        self,
        stores: Stores,
        understanding: Understanding,
        deferred: Sequence[RaisedCard],
        refreshed: Sequence[CaseInView],
    ) -> Noticed:
        """P: raise the deferred confirmations and the cards the refreshed views now need; what
        could not be raised says so."""
        self._deferred = list(deferred)
        self.said = []
        for case in refreshed:
            await self._raise_deferred(stores, case, understanding)
            await self._ensure_card(stores, case, offer=case.case_ref.key in self._late)
        if self._deferred:  # their case could not be refreshed: no card, and say so
            self._deferred.clear()
            self.said.append(noticed(codes.NOTICE_INTERACTION_UNAVAILABLE))
        return sum(self.said, NOTHING)

    async def _persist(
        self, stores: Stores, card: Interaction, commands: Sequence[PlannedCommand] = ()
    ) -> None:
        if await persist_card(stores, self.turn, card, commands, self.audit):
            self.shown.append(card)
            self.touched.add(card.case_ref.key)
        else:
            self.said.append(noticed(codes.NOTICE_INTERACTION_UNAVAILABLE))

    async def _raise_deferred(
        self, stores: Stores, case: CaseInView, understanding: Understanding
    ) -> None:
        acts = {act.act_id: act for act in understanding.acts}
        for raised in [r for r in self._deferred if r.card.case_ref.key == case.case_ref.key]:
            self._deferred.remove(raised)
            plan = reduce_on_case(
                account_id=self.turn.account_id,
                turn_id=self.turn.turn_id,
                act=acts[raised.act_id],
                case=case,
                constraints=understanding.constraints,
                cards=self.factory,
            )
            self.said.append(self.tell.report(plan))
            waiting = plan.awaiting.get(raised.act_id)
            if waiting is not None:
                await self._persist(stores, waiting.card, waiting.commands)

    async def _ensure_card(self, stores: Stores, case: CaseInView, *, offer: bool) -> None:
        requirement = case.view.blocking_interaction
        revision = case.case_ref.expected_revision
        existing = await stores.interactions.for_case(self.turn.account_id, case.case_ref.key)
        current = [
            c
            for c in existing
            if c.status.is_open and c.blocking
            and (c.revision_independent or c.bound_revision == revision)
        ]  # fmt: skip
        if current:
            card = current[0]
            matches = requirement is not None and requirement_key(card) == requirement.key
            shown = any(c.interaction_id == card.interaction_id for c in self.shown)
            if (offer or matches) and not shown and card.status is InteractionStatus.ACTIVE:
                self.shown.append(card)
            return
        if requirement is None:
            return
        for card in existing:
            if (
                requirement_key(card) == requirement.key
                and card.bound_revision == revision
                and card.status in _ANSWERED
            ):
                return
        try:
            card = self.factory.requirement(case, requirement)
        except (MissingCopy, CopyRenderError):  # its words cannot be written: no card
            self.said.append(noticed(codes.NOTICE_INTERACTION_UNAVAILABLE))
            return
        await self._persist(stores, card)
