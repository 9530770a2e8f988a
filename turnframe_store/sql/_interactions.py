"""Interactions (cards) on SQL (internal)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import sqlalchemy as sa

from turnframe_core.cases import CaseKey
from turnframe_core.interactions import Interaction, InteractionStatus
from turnframe_store.errors import InvalidRecord
from turnframe_store.records import InteractionFinish
from turnframe_store.roles import interactions as card_rules
from turnframe_store.roles import rules
from turnframe_store.roles.interactions import InteractionStore
from turnframe_store.roles.rules import Verdict
from turnframe_store.sql._backend import Connection, Result, Row, Statement
from turnframe_store.sql._core import Retry, SqlCore, Step, refuse
from turnframe_store.sql._rows import event_id_list
from turnframe_store.sql._statements import Compiler, among, bind, values_of

__all__ = ["InteractionStatements", "SqlInteractions"]

_Status = InteractionStatus


@dataclass(frozen=True)
class InteractionStatements:
    card_insert: Statement
    card_get: Statement
    cards_open_in_conversation: Statement
    cards_of_case: Statement
    card_blocking_holder: Statement
    card_claim: Statement
    #: One statement per status a finish may settle into (`card_rules.SETTLEMENTS`).
    card_settle: Mapping[InteractionStatus, Statement]
    #: One statement per way to close an active card (declined, dismissed).
    card_close: Mapping[InteractionStatus, Statement]
    cards_invalidate_stale: Statement
    cards_invalidate_all: Statement
    card_invalidate: Statement
    cards_expire: Statement

    @classmethod
    def build(cls, sql: Compiler) -> InteractionStatements:
        c = sql.compile
        card = sql.tables["tf_interaction"]
        account = bind("account_id")
        card_key = (card.c.account_id == account, card.c.interaction_id == bind("interaction_id"))
        of_case = (
            card.c.account_id == account,
            card.c.workflow == bind("workflow"),
            card.c.case_id == bind("case_id"),
        )
        by_creation = (card.c.created_at, card.c.interaction_id)
        now = bind("now", card.c.resolved_at.type)

        def leaving_for(target: InteractionStatus) -> sa.ColumnElement[bool]:
            return among(card.c.status, card_rules.card_sources(target))

        claimed = sa.or_(
            bind("option_id", sa.Text).is_(None),
            card.c.resolved_option_id == bind("option_id", sa.Text),
        )
        settle_values: dict[InteractionStatus, dict[str, Any]] = {
            _Status.RESOLVED: {"resolved_at": now, "resolution_event_ids": bind("event_ids")},
            _Status.FAILED: {"resolved_at": now},
            _Status.ACTIVE: {"resolved_option_id": sa.null()},
        }
        invalidated = (card.c.interaction_id, card.c.created_at)
        invalidate = sa.update(card).values(status=_Status.INVALIDATED.value, resolved_at=now)
        due_cards = (
            sa.select(card.c.account_id, card.c.interaction_id)
            .where(leaving_for(_Status.EXPIRED), card.c.expires_at <= now)
            .order_by(card.c.expires_at, card.c.account_id, card.c.interaction_id)
            .limit(bind("limit"))
            .with_for_update(skip_locked=True)
            .cte("due")
        )
        return cls(
            card_insert=c(
                "card_insert",
                sql.insert(card)
                .values(values_of(card))
                .on_conflict_do_nothing(index_elements=[card.c.account_id, card.c.interaction_id])
                .returning(card.c.interaction_id),
            ),
            card_get=c("card_get", sa.select(card).where(*card_key)),
            cards_open_in_conversation=c(
                "cards_open_in_conversation",
                sa.select(card)
                .where(
                    card.c.account_id == account,
                    card.c.conversation_id == bind("conversation_id"),
                    among(card.c.status, card_rules.OPEN_CARD_STATUSES),
                )
                .order_by(*by_creation),
            ),
            cards_of_case=c(
                "cards_of_case", sa.select(card).where(*of_case).order_by(*by_creation)
            ),
            card_blocking_holder=c(
                "card_blocking_holder",
                sa.select(card).where(
                    *of_case,
                    card.c.blocking.is_(True),
                    among(card.c.status, card_rules.OPEN_CARD_STATUSES),
                ),
            ),
            card_claim=c(
                "card_claim",
                sa.update(card)
                .where(*card_key, leaving_for(_Status.RESOLVING))
                .values(status=_Status.RESOLVING.value, resolved_option_id=bind("option_id"))
                .returning(*card.c),
            ),
            card_settle=MappingProxyType(
                {
                    status: c(
                        f"card_settle_{status.value}",
                        sa.update(card)
                        .where(*card_key, leaving_for(status), claimed)
                        .values(status=status.value, **settle_values[status])
                        .returning(*card.c),
                    )
                    for status in sorted(card_rules.SETTLEMENTS)
                }
            ),
            card_close=MappingProxyType(
                {
                    status: c(
                        f"card_close_{status.value}",
                        sa.update(card)
                        .where(*card_key, leaving_for(status))
                        .values(
                            status=status.value,
                            resolved_at=now,
                            resolved_option_id=bind("option_id"),
                            resolution_event_ids="[]",
                        )
                        .returning(*card.c),
                    )
                    for status in (_Status.DECLINED, _Status.DISMISSED)
                }
            ),
            cards_invalidate_stale=c(
                "cards_invalidate_stale",
                invalidate.where(
                    *of_case,
                    leaving_for(_Status.INVALIDATED),
                    card.c.revision_independent.is_(False),
                    card.c.case_revision != bind("revision"),
                ).returning(*invalidated),
            ),
            cards_invalidate_all=c(
                "cards_invalidate_all",
                invalidate.where(*of_case, leaving_for(_Status.INVALIDATED)).returning(
                    *invalidated
                ),
            ),
            card_invalidate=c(
                "card_invalidate",
                invalidate.where(*card_key, leaving_for(_Status.INVALIDATED)).returning(
                    *invalidated
                ),
            ),
            cards_expire=c(
                "cards_expire",
                sa.update(card)
                .where(
                    card.c.account_id == due_cards.c.account_id,
                    card.c.interaction_id == due_cards.c.interaction_id,
                )
                .values(status=_Status.EXPIRED.value, resolved_at=now)
                .returning(*card.c),
            ),
        )


def _case(account_id: str, case_key: CaseKey) -> dict[str, Any]:
    return {"account_id": account_id, "workflow": case_key.workflow, "case_id": case_key.case_id}


class SqlInteractions(InteractionStore):
    def __init__(self, core: SqlCore) -> None:
        super().__init__(core.faults)
        self._core = core
        self._st = core.sql.statements(InteractionStatements)

    async def _get(self, account_id: str, interaction_id: str) -> Interaction:
        key = {"account_id": account_id, "interaction_id": interaction_id}
        return self._core.codec.card(await self._core.fetch_one(self._st.card_get, key))

    async def _open_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[Interaction, ...]:
        rows = await self._core.fetch(
            self._st.cards_open_in_conversation,
            {"account_id": account_id, "conversation_id": conversation_id},
        )
        return self._core.codec.cards(rows)

    async def _for_case(self, account_id: str, case_key: CaseKey) -> tuple[Interaction, ...]:
        rows = await self._core.fetch(self._st.cards_of_case, _case(account_id, case_key))
        return self._core.codec.cards(rows)

    def insert_steps(self, card: Interaction) -> list[Step]:
        """Insert a new card; the partial unique index keeps one open blocking card per case
        (`card_rules.blocking_slot`), and a stored id is judged by `card_rules.reinsert`."""
        try:
            card_rules.new_card(card)
        except InvalidRecord as refusal:
            return [refuse(refusal)]

        async def judge(result: Result | None, prior: Row | None) -> Interaction:
            assert result is not None
            if result.rows:
                return card
            return card_rules.reinsert(self._core.codec.card(rules.found(prior)), card)

        key = {"account_id": card.account_id, "interaction_id": card.interaction_id}
        params = self._core.codec.card_params(card)
        return [Step(self._st.card_insert, params, judge, self._st.card_get, key)]

    async def _insert(self, interaction: Interaction) -> Interaction:
        (stored,) = await self._core.write(self.insert_steps(interaction))
        return stored  # type: ignore[no-any-return]

    async def _insert_replacing_blocking(self, interaction: Interaction) -> tuple[str, ...]:
        card = interaction

        async def body(connection: Connection) -> tuple[str, ...]:
            steps: list[Step] = []
            replaced: tuple[str, ...] = ()
            if card.blocking:
                rows = await connection.fetch(
                    self._st.card_blocking_holder, _case(card.account_id, card.case_ref.key)
                )
                holders = [r for r in rows if r["interaction_id"] != card.interaction_id]
                if holders:
                    card_rules.replace_holder(self._core.codec.card(holders[0]))
                    steps.append(self._invalidate_holder(card.account_id, holders[0]))
                    replaced = (holders[0]["interaction_id"],)
            steps.extend(self.insert_steps(card))
            await self._core.apply(connection, steps)
            return replaced

        return await self._core.transaction(body)

    def _invalidate_holder(self, account_id: str, holder: Row) -> Step:
        async def judge(result: Result | None, prior: Row | None) -> None:
            if result is None or not result.rows:
                raise Retry()

        params = {
            "account_id": account_id,
            "interaction_id": holder["interaction_id"],
            "now": self._core.now(),
        }
        return Step(self._st.card_invalidate, params, judge)

    def _card_cas(
        self,
        statement: Statement,
        params: dict[str, Any],
        rule: Callable[[Interaction], Verdict],
        moved: Callable[[Interaction], object] | None = None,
    ) -> Step:
        key = {"account_id": params["account_id"], "interaction_id": params["interaction_id"]}
        return self._core.cas(
            statement, params, self._st.card_get, key, self._core.codec.card, rule, moved
        )

    async def _begin_resolution(
        self, account_id: str, interaction_id: str, option_id: str
    ) -> Interaction:
        params = {
            "account_id": account_id,
            "interaction_id": interaction_id,
            "option_id": option_id,
        }
        step = self._card_cas(
            self._st.card_claim,
            params,
            lambda card: card_rules.claim(card, option_id),
            lambda card: card_rules.offered(card, option_id),
        )
        (card,) = await self._core.write([step])
        return card  # type: ignore[no-any-return]

    def finish_steps(self, account_id: str, settled: InteractionFinish) -> list[Step]:
        params = {
            "account_id": account_id,
            "interaction_id": settled.interaction_id,
            "option_id": settled.option_id,
            "now": self._core.now(),
            "event_ids": event_id_list(settled.event_ids),
        }
        return [
            self._card_cas(
                self._st.card_settle[settled.status],
                params,
                lambda card: card_rules.finish(card, settled),
            )
        ]

    async def _finish(self, account_id: str, settled: InteractionFinish) -> Interaction:
        (card,) = await self._core.write(self.finish_steps(account_id, settled))
        return card  # type: ignore[no-any-return]

    async def _close(
        self,
        account_id: str,
        interaction_id: str,
        status: InteractionStatus,
        option_id: str | None,
    ) -> Interaction:
        params = {
            "account_id": account_id,
            "interaction_id": interaction_id,
            "option_id": option_id,
            "now": self._core.now(),
        }
        step = self._card_cas(
            self._st.card_close[status],
            params,
            lambda card: card_rules.close(card, status, option_id),
            lambda card: card_rules.offered(card, option_id),
        )
        (card,) = await self._core.write([step])
        return card  # type: ignore[no-any-return]

    def invalidate_steps(
        self, account_id: str, case_key: CaseKey, current_revision: int | None
    ) -> list[Step]:
        """`card_rules.stale` as a statement: the case's active cards, with a revision only the
        revision-bound ones bound to another revision."""
        params = {**_case(account_id, case_key), "now": self._core.now()}
        statement = self._st.cards_invalidate_all
        if current_revision is not None:
            statement = self._st.cards_invalidate_stale
            params["revision"] = current_revision
        time_out = self._core.backend.time_out

        async def judge(result: Result | None, prior: Row | None) -> tuple[str, ...]:
            assert result is not None
            moved = sorted(
                (time_out(row["created_at"]), row["interaction_id"]) for row in result.rows
            )
            return tuple(interaction_id for _, interaction_id in moved)

        return [Step(statement, params, judge)]

    async def _invalidate(
        self, account_id: str, case_key: CaseKey, current_revision: int | None
    ) -> tuple[str, ...]:
        steps = self.invalidate_steps(account_id, case_key, current_revision)
        (ids,) = await self._core.write(steps)
        return ids  # type: ignore[no-any-return]

    async def _expire_due(self, now: int, limit: int) -> tuple[Interaction, ...]:
        params = {"now": self._core.backend.time_in(now), "limit": limit}
        (result,) = await self._core.write([Step(self._st.cards_expire, params)])
        cards = self._core.codec.cards(result.rows)
        return tuple(sorted(cards, key=card_rules.by_expiry))
