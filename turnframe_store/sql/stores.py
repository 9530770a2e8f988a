"""`SqlStores`: every store role on PostgreSQL (psycopg 3) or SQLite (aiosqlite).

`MemoryStores` is the executable specification: each method here decides exactly as its memory
twin does, in the same order, and raises the same errors. How the SQL store keeps the rules:

- Every write is one transaction. Compare-and-swap lives in the writing statement (an UPDATE that
  names the state it expects and returns the row it moved); a SELECT right after it reads the row
  back, and when the statement moved nothing that read-back decides what memory would have said:
  `NotFound`, an accepted repeat, or `Conflict`.
- A write is a list of steps (`_Step`): a statement, its read-back and the judge of their
  results, in order. The statements of one write go to PostgreSQL in one pipeline; the judges
  then read the results in order, each on the state as of its own step (never what later steps
  made of its row), so the first failing step is the one reported, as in memory. A step whose
  statement the database refuses aborts the transaction; the steps before it are judged
  afterwards on their own results.
- Hot paths are single statements or one pipeline: the commit bundle is one transaction in its
  normative order (journal completions, events, card finishes, invalidations, card inserts, outbox
  rows, replay record, phase marker) with the phase marker folded into the same pipeline.
- Event sequences follow commit order on PostgreSQL (an advisory transaction lock is taken before
  events are inserted), so paging by sequence never skips a late-committing event.

The role classes share one `_Engine`; adopters use `SqlStores`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn, TypeVar

from pydantic import ValidationError
from sqlalchemy.engine import make_url

from turnframe_core.canonical import CanonicalJsonError
from turnframe_core.cases import CaseKey
from turnframe_core.events import DomainEvent
from turnframe_core.ids import derive_replay_token
from turnframe_core.interactions import Interaction, InteractionStatus
from turnframe_core.replay import CommandOutcome, ReplayRecord, TurnPhase
from turnframe_core.turn import AssistantTurn
from turnframe_store.bundle import Stores
from turnframe_store.clock import Clock, system_clock
from turnframe_store.errors import Conflict, Corrupt, InvalidRecord, NotFound, StoreError
from turnframe_store.faults import FaultPlan, FaultPoint
from turnframe_store.records import (
    CommitBundle,
    CommitResult,
    ConversationRecord,
    EventCursor,
    EventPage,
    Fresh,
    JournalAdmission,
    JournalEntry,
    JournalStatus,
    OutboxEntry,
    OutboxStatus,
    PhaseMarker,
    Replay,
    UserTurnRecord,
)
from turnframe_store.sql import _migrate
from turnframe_store.sql._backend import (
    Backend,
    Batch,
    Connection,
    Hooks,
    Params,
    Result,
    Row,
    Statement,
)
from turnframe_store.sql._rows import CARD_LIFECYCLE, Codec, document, event_id_list
from turnframe_store.sql._statements import Statements, statements_for
from turnframe_store.sql._url import parse_url
from turnframe_store.sql.config import SqlConfig

__all__ = ["SqlStores"]

R = TypeVar("R")

_FINISH: Final = frozenset(
    {InteractionStatus.RESOLVED, InteractionStatus.FAILED, InteractionStatus.ACTIVE}
)
#: How often a read-decide-write is retried when a concurrent writer moved its row in between.
_RETRIES: Final = 5

#: A step's judge: the result of its statement, and its row as the step left it (read back
#: right after the statement, before any later step of the same write ran), when it reads one.
Judge = Callable[[Result | None, Row | None], Awaitable[Any]]


async def _accept(result: Result | None, prior: Row | None) -> Result | None:
    return result


@dataclass
class _Step:
    """One step of a write: a statement (or none: a check made in order) and its judge.

    `read` (with `read_params`) reads the step's row back right after its statement, in the same
    batch: a judge whose statement moved nothing decides on the row as of its own step, never on
    what later steps of the write made of it."""

    statement: Statement | None
    params: dict[str, Any] = field(default_factory=dict)
    judge: Judge = _accept
    read: Statement | None = None
    read_params: dict[str, Any] = field(default_factory=dict)


def _check(check: Callable[[], None]) -> _Step:
    """A step without a statement: `check` raises to stop the write at this point of the order."""

    async def judge(result: Result | None, prior: Row | None) -> None:
        check()

    return _Step(None, judge=judge)


def _refuse(error: StoreError) -> _Step:
    def check() -> None:
        raise error

    return _check(check)


class _Aborted(Exception):
    """The database refused the statement of step `failed_at`; the transaction is rolled back."""

    def __init__(self, steps: Sequence[_Step], batch: Batch) -> None:
        super().__init__("aborted")
        self.steps = steps
        self.batch = batch


class _Retry(Exception):
    """A concurrent writer moved a row between this write's read and its compare-and-swap."""


def _limit(limit: int) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise InvalidRecord("a limit is a positive integer")
    return limit


def _first(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    return rows[0] if rows else None


class _Engine:
    """The backend, its compiled statements, the clock and the fault plan; every operation."""

    def __init__(
        self,
        backend: Backend,
        statements: Statements,
        clock: Clock,
        faults: FaultPlan,
    ) -> None:
        self.backend = backend
        self.st = statements
        self.clock = clock
        self.faults = faults
        self.codec = Codec(backend.time_in, backend.time_out)
        self.postgres = backend.dialect_name == "postgresql"

    # --- running steps --------------------------------------------------------------------------

    async def fetch(self, statement: Statement, params: dict[str, Any]) -> list[dict[str, Any]]:
        async with self.backend.reading() as connection:
            return await connection.fetch(statement, params)

    async def apply(self, connection: Connection, steps: Sequence[_Step]) -> list[Any]:
        """Run the steps' statements (each followed by its read-back) as one batch on
        `connection`, then judge them in order."""
        batch: list[tuple[Statement, Params]] = []
        readbacks: set[int] = set()
        for step in steps:
            if step.statement is None:
                continue
            batch.append((step.statement, step.params))
            if step.read is not None:
                readbacks.add(len(batch))
                batch.append((step.read, step.read_params))
        outcome = await connection.run(batch, frozenset(readbacks)) if batch else Batch([])
        if outcome.failed_at is not None:
            raise _Aborted(steps, outcome)
        return await self._judge(steps, outcome.results, None)

    @staticmethod
    async def _judge(
        steps: Sequence[_Step], results: Sequence[Result], stop_at: int | None
    ) -> list[Any]:
        """Judge the steps in order on their results; with `stop_at`, only the steps whose
        statements all ran before the statement at that index."""
        values: list[Any] = []
        at = 0
        for step in steps:
            if step.statement is None:
                values.append(await step.judge(None, None))
                continue
            width = 1 if step.read is None else 2
            if stop_at is not None and at + width > stop_at:
                break
            prior = None if step.read is None else _first(results[at + 1].rows)
            values.append(await step.judge(results[at], prior))
            at += width
        return values

    async def transaction(self, body: Callable[[Connection], Awaitable[R]]) -> R:
        """Run `body` in one write transaction; retried when it raises `_Retry`."""
        for _ in range(_RETRIES):
            try:
                try:
                    async with self.backend.writing() as connection:
                        return await body(connection)
                except _Aborted as aborted:
                    await self._judge_aborted(aborted)
            except _Retry:
                continue
        raise Conflict("the record kept changing under a concurrent writer")

    async def _judge_aborted(self, aborted: _Aborted) -> NoReturn:
        """Judge the steps before the refused statement (each on its own results and read-back)
        and raise the first failure among them, else the refused statement's own error."""
        batch = aborted.batch
        assert batch.failed_at is not None and batch.error is not None
        await self._judge(aborted.steps, batch.results, batch.failed_at)
        raise batch.error from None

    async def write(self, steps: Sequence[_Step]) -> list[Any]:
        async def body(connection: Connection) -> list[Any]:
            return await self.apply(connection, steps)

        return await self.transaction(body)

    async def write_enlisted(self, raw: Any, steps: Sequence[_Step]) -> list[Any]:
        """The steps inside a caller's open transaction on `raw`, behind a savepoint: if a step
        fails, nothing of them remains, and the caller's transaction stays usable."""
        try:
            async with self.backend.enlisted(raw) as connection:
                return await self.apply(connection, steps)
        except _Aborted as aborted:
            await self._judge_aborted(aborted)
        except _Retry:
            raise Conflict("a record moved under a concurrent writer") from None

    # --- conversations --------------------------------------------------------------------------

    async def get_conversation(self, account_id: str, conversation_id: str) -> ConversationRecord:
        row = _first(
            await self.fetch(
                self.st.conversation_get,
                {"account_id": account_id, "conversation_id": conversation_id},
            )
        )
        if row is None:
            raise NotFound()
        return self.codec.conversation(row)

    async def ensure_conversation(
        self, account_id: str, conversation_id: str
    ) -> ConversationRecord:
        try:
            return await self.get_conversation(account_id, conversation_id)
        except NotFound:
            pass
        try:
            record = ConversationRecord(
                account_id=account_id, conversation_id=conversation_id, created_at=self.clock()
            )
        except ValidationError:
            raise InvalidRecord("not a well-formed account or conversation id") from None
        key = {"account_id": account_id, "conversation_id": conversation_id}

        async def stored(result: Result | None, prior: Row | None) -> ConversationRecord:
            assert result is not None
            return self.codec.conversation(result.rows[0])

        _, found = await self.write(
            [
                _Step(
                    self.st.conversation_insert,
                    {**key, "created_at": self.backend.time_in(record.created_at)},
                ),
                _Step(self.st.conversation_get, key, stored),
            ]
        )
        return found  # type: ignore[no-any-return]

    async def get_user_turn(self, account_id: str, turn_id: str) -> UserTurnRecord:
        row = _first(
            await self.fetch(self.st.turn_get, {"account_id": account_id, "turn_id": turn_id})
        )
        if row is None:
            raise NotFound()
        return self.codec.user_turn(row)

    async def append_user_turn(self, record: UserTurnRecord) -> None:
        marker = {
            "account_id": record.account_id,
            "turn_id": record.turn_id,
            "conversation_id": record.conversation_id,
            "phase": TurnPhase.RECEIVED.value,
            "updated_at": self.backend.time_in(self.clock()),
        }
        try:
            await self.write(
                [
                    _Step(self.st.turn_insert, self.codec.user_turn_params(record)),
                    _Step(self.st.phase_insert, marker),
                ]
            )
        except Conflict:
            # Memory asks for the conversation first: a stored turn id under a conversation that
            # does not exist is NotFound. Conversations are never deleted, so this read decides.
            key = {"account_id": record.account_id, "conversation_id": record.conversation_id}
            if not await self.fetch(self.st.conversation_get, key):
                raise NotFound() from None
            raise

    async def append_assistant_turn(
        self, account_id: str, turn: AssistantTurn, phase: TurnPhase | None
    ) -> None:
        if turn.account_id != account_id:
            raise InvalidRecord("the assistant turn belongs to another account")
        problem: InvalidRecord | None = None
        text = ""
        if not turn.status.is_terminal:
            problem = InvalidRecord("only a terminal assistant turn is stored")
        else:
            try:
                text = turn.to_stored_json()
            except CanonicalJsonError:
                problem = InvalidRecord("the assistant turn has no canonical form")
        key = {"account_id": account_id, "turn_id": turn.turn_id}

        async def judge(result: Result | None, prior: Row | None) -> None:
            if result is not None and result.rows:
                return
            row = prior
            if row is None:
                raise NotFound()
            if row["conversation_id"] != turn.conversation_id:
                raise InvalidRecord("the assistant turn belongs to another conversation")
            if problem is not None:
                raise problem
            if row["assistant_turn"] != text:
                raise Conflict("the assistant turn is already stored with other content")

        if problem is not None:
            await judge(None, _first(await self.fetch(self.st.turn_get, key)))
        steps = [
            _Step(
                self.st.turn_answer,
                {**key, "conversation_id": turn.conversation_id, "assistant_turn": text},
                judge,
                self.st.turn_get,
                key,
            )
        ]
        if phase is not None:
            steps.extend(self.phase_steps(account_id, turn.turn_id, phase))
        await self.write(steps)

    async def get_assistant_turn(self, account_id: str, turn_id: str) -> AssistantTurn:
        row = _first(
            await self.fetch(self.st.turn_get, {"account_id": account_id, "turn_id": turn_id})
        )
        text = None if row is None else row["assistant_turn"]
        if text is None:
            raise NotFound()
        try:
            turn = AssistantTurn.from_stored_json(text)
        except ValidationError:
            raise Corrupt("the stored assistant turn does not read back") from None
        if turn.to_stored_json() != text:
            raise Corrupt("the stored assistant turn does not reload byte for byte")
        return turn

    def phase_steps(self, account_id: str, turn_id: str, phase: TurnPhase) -> list[_Step]:
        try:
            phase = TurnPhase(phase)
        except ValueError:
            return [_refuse(InvalidRecord("not a turn phase"))]
        key = {"account_id": account_id, "turn_id": turn_id}

        async def judge(result: Result | None, prior: Row | None) -> PhaseMarker:
            assert result is not None
            if result.rows:
                return self.codec.marker(result.rows[0])
            row = prior
            if row is None:
                raise NotFound()
            marker = self.codec.marker(row)
            # Moving nothing means the marker was at this phase or final when the update ran.
            if marker.phase is not phase and marker.phase.is_terminal:
                raise Conflict("the turn's phase is final")
            return marker

        params = {**key, "phase": phase.value, "updated_at": self.backend.time_in(self.clock())}
        return [_Step(self.st.phase_move, params, judge, self.st.phase_get, key)]

    async def set_phase(self, account_id: str, turn_id: str, phase: TurnPhase) -> PhaseMarker:
        (marker,) = await self.write(self.phase_steps(account_id, turn_id, phase))
        return marker  # type: ignore[no-any-return]

    async def get_phase(self, account_id: str, turn_id: str) -> PhaseMarker:
        row = _first(
            await self.fetch(self.st.phase_get, {"account_id": account_id, "turn_id": turn_id})
        )
        if row is None:
            raise NotFound()
        return self.codec.marker(row)

    async def list_turns(self, account_id: str, conversation_id: str) -> tuple[UserTurnRecord, ...]:
        rows = await self.fetch(
            self.st.turns_of_conversation,
            {"account_id": account_id, "conversation_id": conversation_id},
        )
        return tuple(self.codec.user_turn(row) for row in rows)

    async def list_unfinished_turns(self, limit: int) -> tuple[PhaseMarker, ...]:
        rows = await self.fetch(self.st.phases_unfinished, {"limit": _limit(limit)})
        return tuple(self.codec.marker(row) for row in rows)

    # --- interactions ---------------------------------------------------------------------------

    def card(self, row: Row | None) -> Interaction:
        if row is None:
            raise NotFound()
        return self.codec.card(row)

    async def get_card(self, account_id: str, interaction_id: str) -> Interaction:
        key = {"account_id": account_id, "interaction_id": interaction_id}
        return self.card(_first(await self.fetch(self.st.card_get, key)))

    async def open_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[Interaction, ...]:
        rows = await self.fetch(
            self.st.cards_open_in_conversation,
            {"account_id": account_id, "conversation_id": conversation_id},
        )
        return self.codec.cards(rows)

    async def cards_of_case(self, account_id: str, case_key: CaseKey) -> tuple[Interaction, ...]:
        rows = await self.fetch(self.st.cards_of_case, self._case(account_id, case_key))
        return self.codec.cards(rows)

    @staticmethod
    def _case(account_id: str, case_key: CaseKey) -> dict[str, Any]:
        return {
            "account_id": account_id,
            "workflow": case_key.workflow,
            "case_id": case_key.case_id,
        }

    def insert_steps(self, card: Interaction) -> list[_Step]:
        if card.status is not InteractionStatus.ACTIVE:
            return [_refuse(InvalidRecord("a new card is active"))]
        if card.resolved_at is not None or card.resolved_option_id or card.resolution_event_ids:
            return [_refuse(InvalidRecord("a new card carries no resolution"))]
        params = self.codec.card_params(card)

        async def judge(result: Result | None, prior: Row | None) -> Interaction:
            assert result is not None
            if result.rows:
                return card
            stored = self.card(prior)
            if stored.model_dump(exclude=set(CARD_LIFECYCLE)) == card.model_dump(
                exclude=set(CARD_LIFECYCLE)
            ):
                return stored
            raise Conflict("another card is stored under this id")

        key = {"account_id": card.account_id, "interaction_id": card.interaction_id}
        return [_Step(self.st.card_insert, params, judge, self.st.card_get, key)]

    async def insert_card(self, card: Interaction) -> Interaction:
        (stored,) = await self.write(self.insert_steps(card))
        return stored  # type: ignore[no-any-return]

    async def insert_replacing_blocking(self, card: Interaction) -> tuple[str, ...]:
        async def body(connection: Connection) -> tuple[str, ...]:
            steps: list[_Step] = []
            replaced: tuple[str, ...] = ()
            if card.blocking:
                rows = await connection.fetch(
                    self.st.card_blocking_holder, self._case(card.account_id, card.case_ref.key)
                )
                holders = [r for r in rows if r["interaction_id"] != card.interaction_id]
                if holders:
                    holder = holders[0]
                    if holder["status"] != InteractionStatus.ACTIVE.value:
                        raise Conflict("the case's blocking card is being resolved")
                    steps.append(self._invalidate_holder_step(card.account_id, holder))
                    replaced = (holder["interaction_id"],)
            steps.extend(self.insert_steps(card))
            await self.apply(connection, steps)
            return replaced

        return await self.transaction(body)

    def _invalidate_holder_step(self, account_id: str, holder: dict[str, Any]) -> _Step:
        async def judge(result: Result | None, prior: Row | None) -> None:
            if result is None or not result.rows:
                raise _Retry()

        params = {
            "account_id": account_id,
            "interaction_id": holder["interaction_id"],
            "now": self.backend.time_in(self.clock()),
        }
        return _Step(self.st.card_invalidate, params, judge)

    async def begin_resolution(
        self, account_id: str, interaction_id: str, option_id: str
    ) -> Interaction:
        async def judge(result: Result | None, prior: Row | None) -> Interaction:
            assert result is not None
            if result.rows:
                card = self.codec.card(result.rows[0])
                if card.payload.option(option_id) is None:
                    raise InvalidRecord("the card does not offer this option")
                return card
            card = self.card(prior)
            if card.payload.option(option_id) is None:
                raise InvalidRecord("the card does not offer this option")
            raise Conflict("the card is not active")

        params = {
            "account_id": account_id,
            "interaction_id": interaction_id,
            "option_id": option_id,
        }
        key = {"account_id": account_id, "interaction_id": interaction_id}
        (card,) = await self.write(
            [_Step(self.st.card_claim, params, judge, self.st.card_get, key)]
        )
        return card  # type: ignore[no-any-return]

    def finish_steps(
        self,
        account_id: str,
        interaction_id: str,
        status: InteractionStatus,
        option_id: str | None,
        event_ids: Sequence[str],
    ) -> list[_Step]:
        try:
            status = InteractionStatus(status)
        except ValueError:
            return [_refuse(InvalidRecord("not a card status"))]
        if status not in _FINISH:
            return [_refuse(InvalidRecord("a finish settles a card as resolved, failed or active"))]
        events = tuple(event_ids)
        statement = {
            InteractionStatus.RESOLVED: self.st.card_resolve,
            InteractionStatus.FAILED: self.st.card_fail,
            InteractionStatus.ACTIVE: self.st.card_release,
        }[status]
        params = {
            "account_id": account_id,
            "interaction_id": interaction_id,
            "option_id": option_id,
            "now": self.backend.time_in(self.clock()),
            "event_ids": event_id_list(events),
        }

        async def judge(result: Result | None, prior: Row | None) -> Interaction:
            assert result is not None
            if result.rows:
                return self.codec.card(result.rows[0])
            card = self.card(prior)
            if card.status is InteractionStatus.RESOLVING:
                if option_id is not None and option_id != card.resolved_option_id:
                    raise Conflict("another option was claimed")
                raise Conflict("the card moved while it was being settled")
            if card.status is status and (
                status is InteractionStatus.ACTIVE
                or (
                    (option_id is None or option_id == card.resolved_option_id)
                    and (status is InteractionStatus.FAILED or events == card.resolution_event_ids)
                )
            ):
                return card
            raise Conflict("the card is settled otherwise")

        key = {"account_id": account_id, "interaction_id": interaction_id}
        return [_Step(statement, params, judge, self.st.card_get, key)]

    async def finish(
        self,
        account_id: str,
        interaction_id: str,
        status: InteractionStatus,
        option_id: str | None,
        event_ids: Sequence[str],
    ) -> Interaction:
        steps = self.finish_steps(account_id, interaction_id, status, option_id, event_ids)
        (card,) = await self.write(steps)
        return card  # type: ignore[no-any-return]

    async def close_card(
        self,
        account_id: str,
        interaction_id: str,
        status: InteractionStatus,
        option_id: str | None,
    ) -> Interaction:
        """active -> declined | dismissed; the same close again is accepted."""

        def offered(card: Interaction) -> None:
            if option_id is not None and card.payload.option(option_id) is None:
                raise InvalidRecord("the card does not offer this option")

        async def judge(result: Result | None, prior: Row | None) -> Interaction:
            assert result is not None
            if result.rows:
                card = self.codec.card(result.rows[0])
                offered(card)
                return card
            card = self.card(prior)
            if card.status is InteractionStatus.ACTIVE:
                offered(card)
                raise Conflict("the card moved while it was being closed")
            if card.status is status and option_id in (None, card.resolved_option_id):
                return card
            raise Conflict("the card is not active")

        params = {
            "account_id": account_id,
            "interaction_id": interaction_id,
            "status": status.value,
            "option_id": option_id,
            "now": self.backend.time_in(self.clock()),
        }
        key = {"account_id": account_id, "interaction_id": interaction_id}
        (card,) = await self.write(
            [_Step(self.st.card_close, params, judge, self.st.card_get, key)]
        )
        return card  # type: ignore[no-any-return]

    def invalidate_steps(
        self, account_id: str, case_key: CaseKey, current_revision: int | None
    ) -> list[_Step]:
        """Invalidate the case's active cards; with a revision, only stale, revision-bound ones."""
        params = {**self._case(account_id, case_key), "now": self.backend.time_in(self.clock())}
        statement = self.st.cards_invalidate_all
        if current_revision is not None:
            statement = self.st.cards_invalidate_stale
            params["revision"] = current_revision

        async def judge(result: Result | None, prior: Row | None) -> tuple[str, ...]:
            assert result is not None
            moved = sorted(
                (self.backend.time_out(row["created_at"]), row["interaction_id"])
                for row in result.rows
            )
            return tuple(interaction_id for _, interaction_id in moved)

        return [_Step(statement, params, judge)]

    async def invalidate(
        self, account_id: str, case_key: CaseKey, current_revision: int | None
    ) -> tuple[str, ...]:
        (ids,) = await self.write(self.invalidate_steps(account_id, case_key, current_revision))
        return ids  # type: ignore[no-any-return]

    async def expire_due(self, now: int, limit: int) -> tuple[Interaction, ...]:
        params = {"now": self.backend.time_in(now), "limit": _limit(limit)}
        (result,) = await self.write([_Step(self.st.cards_expire, params)])
        cards = self.codec.cards(result.rows)
        return tuple(
            sorted(cards, key=lambda c: (c.expires_at or 0, c.account_id, c.interaction_id))
        )

    # --- command journal ------------------------------------------------------------------------

    def entry(self, row: Row | None) -> JournalEntry:
        if row is None:
            raise NotFound()
        return self.codec.entry(row)

    async def get_entry(self, account_id: str, command_id: str) -> JournalEntry:
        key = {"account_id": account_id, "command_id": command_id}
        return self.entry(_first(await self.fetch(self.st.journal_get, key)))

    async def get_entry_by_key(self, account_id: str, idempotency_key: str) -> JournalEntry:
        row = _first(
            await self.fetch(
                self.st.journal_get_by_key,
                {"account_id": account_id, "idempotency_key": idempotency_key},
            )
        )
        if row is None:
            raise NotFound()
        return self.codec.entry(row)

    async def journal_for_turn(
        self, account_id: str, turn_id: str, *, unsettled: bool = False
    ) -> tuple[JournalEntry, ...]:
        statement = self.st.journal_unsettled_of_turn if unsettled else self.st.journal_of_turn
        rows = await self.fetch(statement, {"account_id": account_id, "turn_id": turn_id})
        return self.codec.entries(rows)

    async def begin(self, entry: JournalEntry) -> JournalAdmission:
        if entry.status not in (JournalStatus.PENDING, JournalStatus.AWAITING_CONFIRMATION):
            raise InvalidRecord("a journal entry is admitted pending or awaiting confirmation")
        key = {"account_id": entry.account_id, "idempotency_key": entry.idempotency_key}

        async def judge(result: Result | None, prior: Row | None) -> JournalAdmission:
            assert result is not None
            if result.rows:
                return Fresh(entry=entry)
            row = prior
            if row is None:
                raise Conflict("the command id is stored under another idempotency key")
            stored = self.codec.entry(row)
            if not stored.same_command(entry):
                raise Conflict("the idempotency key was used for another command")
            return Replay(entry=stored)

        (admission,) = await self.write(
            [
                _Step(
                    self.st.journal_insert,
                    self.codec.entry_params(entry),
                    judge,
                    self.st.journal_get_by_key,
                    key,
                )
            ]
        )
        return admission  # type: ignore[no-any-return]

    async def mark_executing(self, account_id: str, command_id: str) -> JournalEntry:
        async def judge(result: Result | None, prior: Row | None) -> JournalEntry:
            assert result is not None
            if result.rows:
                return self.codec.entry(result.rows[0])
            entry = self.entry(prior)
            if entry.status is JournalStatus.EXECUTING:
                return entry
            raise Conflict(f"a {entry.status.value} command does not start executing")

        params = {"account_id": account_id, "command_id": command_id}
        (entry,) = await self.write(
            [_Step(self.st.journal_start, params, judge, self.st.journal_get, params)]
        )
        return entry  # type: ignore[no-any-return]

    def complete_steps(
        self, account_id: str, command_id: str, outcome: CommandOutcome
    ) -> list[_Step]:
        target = JournalStatus.for_outcome(outcome)
        if target is JournalStatus.AWAITING_CONFIRMATION:
            return [_refuse(InvalidRecord("this outcome does not settle a command"))]
        statement = (
            self.st.journal_settle_unknown
            if target is JournalStatus.OUTCOME_UNKNOWN
            else self.st.journal_settle
        )
        params = {
            "account_id": account_id,
            "command_id": command_id,
            "status": target.value,
            "outcome": self.codec.outcome(outcome),
            "completed_at": self.backend.time_in(self.clock()),
        }

        async def judge(result: Result | None, prior: Row | None) -> JournalEntry:
            assert result is not None
            if result.rows:
                return self.codec.entry(result.rows[0])
            entry = self.entry(prior)
            if entry.status is target and entry.outcome == outcome:
                return entry
            raise Conflict(f"a {entry.status.value} command cannot be settled this way")

        key = {"account_id": account_id, "command_id": command_id}
        return [_Step(statement, params, judge, self.st.journal_get, key)]

    async def complete(
        self, account_id: str, command_id: str, outcome: CommandOutcome
    ) -> JournalEntry:
        (entry,) = await self.write(self.complete_steps(account_id, command_id, outcome))
        return entry  # type: ignore[no-any-return]

    # --- event ledger ---------------------------------------------------------------------------

    def append_steps(self, events: Sequence[DomainEvent]) -> list[_Step]:
        steps: list[_Step] = []
        if self.st.event_lock is not None:
            steps.append(_Step(self.st.event_lock))

        async def sequence(result: Result | None, prior: Row | None) -> int:
            assert result is not None
            return int(result.rows[0]["sequence"])

        steps.extend(
            _Step(self.st.event_insert, self.codec.event_params(event), sequence)
            for event in events
        )
        return steps

    @staticmethod
    def sequenced(events: Sequence[DomainEvent], values: Iterable[Any]) -> tuple[DomainEvent, ...]:
        sequences = [value for value in values if isinstance(value, int)]
        return tuple(
            event.model_copy(update={"sequence": number})
            for event, number in zip(events, sequences, strict=True)
        )

    async def append(
        self, account_id: str, events: Sequence[DomainEvent]
    ) -> tuple[DomainEvent, ...]:
        batch = tuple(events)
        await self._check_batch(account_id, batch)
        if not batch:
            return ()
        values = await self.write(self.append_steps(batch))
        return self.sequenced(batch, values)

    async def _check_batch(self, account_id: str, batch: Sequence[DomainEvent]) -> None:
        """Memory's per-event checks, in its order; a stored id before the first refused event
        is reported first, as memory would."""
        seen: set[str] = set()
        for index, event in enumerate(batch):
            problem: StoreError | None = None
            if event.account_id != account_id:
                problem = InvalidRecord("an event belongs to another account")
            elif event.sequence is not None:
                problem = InvalidRecord("an event is appended without a sequence")
            elif event.event_id in seen:
                problem = Conflict("an event id is already in the ledger")
            if problem is not None:
                if (
                    isinstance(problem, InvalidRecord)
                    and index
                    and await self.get_events(account_id, [e.event_id for e in batch[:index]])
                ):
                    raise Conflict("an event id is already in the ledger")
                raise problem
            seen.add(event.event_id)

    def _id_list(self, ids: Sequence[str]) -> Any:
        return list(ids) if self.postgres else event_id_list(ids)

    async def get_events(
        self, account_id: str, event_ids: Sequence[str]
    ) -> tuple[DomainEvent, ...]:
        ids = list(dict.fromkeys(event_ids))
        if not ids:
            return ()
        rows = await self.fetch(
            self.st.events_by_id, {"account_id": account_id, "event_ids": self._id_list(ids)}
        )
        return self.codec.events(rows)

    async def list_for_case(
        self, account_id: str, case_key: CaseKey, since_revision: int, limit: int
    ) -> tuple[DomainEvent, ...]:
        params = {
            **self._case(account_id, case_key),
            "since_revision": since_revision,
            "limit": _limit(limit),
        }
        return self.codec.events(await self.fetch(self.st.events_of_case, params))

    async def read_from(self, account_id: str, cursor: EventCursor, limit: int) -> EventPage:
        params = {"account_id": account_id, "after": cursor.sequence, "limit": _limit(limit)}
        page = self.codec.events(await self.fetch(self.st.events_after, params))
        next_cursor = EventCursor(sequence=page[-1].sequence or 0) if page else cursor
        return EventPage(events=page, next_cursor=next_cursor)

    # --- outbox ---------------------------------------------------------------------------------

    def row(self, row: Row | None) -> OutboxEntry:
        if row is None:
            raise NotFound()
        return self.codec.outbox(row)

    async def get_row(self, outbox_id: str) -> OutboxEntry:
        return self.row(_first(await self.fetch(self.st.outbox_get, {"outbox_id": outbox_id})))

    async def rows_for_command(self, command_id: str) -> tuple[OutboxEntry, ...]:
        rows = await self.fetch(self.st.outbox_of_command, {"command_id": command_id})
        return self.codec.outbox_rows(rows)

    def enqueue_steps(self, entry: OutboxEntry) -> list[_Step]:
        if entry.status is not OutboxStatus.PENDING:
            return [_refuse(InvalidRecord("an outbox row is enqueued pending"))]

        async def judge(result: Result | None, prior: Row | None) -> OutboxEntry:
            return entry

        return [_Step(self.st.outbox_insert, self.codec.outbox_params(entry), judge)]

    async def enqueue(self, entry: OutboxEntry) -> OutboxEntry:
        (stored,) = await self.write(self.enqueue_steps(entry))
        return stored  # type: ignore[no-any-return]

    async def claim_due(self, now: int, limit: int, worker_id: str) -> tuple[OutboxEntry, ...]:
        if not worker_id:
            raise InvalidRecord("a claim names its worker")
        params = {"now": self.backend.time_in(now), "limit": _limit(limit), "worker_id": worker_id}
        (result,) = await self.write([_Step(self.st.outbox_claim, params)])
        rows = self.codec.outbox_rows(result.rows)
        return tuple(sorted(rows, key=lambda r: (r.created_at, r.outbox_id)))

    async def move_row(
        self,
        statement: Statement,
        params: dict[str, Any],
        repeat: Callable[[OutboxEntry], bool],
    ) -> OutboxEntry:
        """Run one outbox compare-and-swap; when it moves nothing, a row for which `repeat`
        holds is returned as it is, any other is `Conflict`."""
        outbox_id = params["outbox_id"]

        async def judge(result: Result | None, prior: Row | None) -> OutboxEntry:
            assert result is not None
            if result.rows:
                return self.codec.outbox(result.rows[0])
            row = self.row(prior)
            if repeat(row):
                return row
            raise Conflict(f"a {row.status.value} row does not move this way")

        read = {"outbox_id": outbox_id}
        (row,) = await self.write([_Step(statement, params, judge, self.st.outbox_get, read)])
        return row  # type: ignore[no-any-return]

    async def mark_completed(self, outbox_id: str) -> OutboxEntry:
        return await self.move_row(
            self.st.outbox_complete,
            {"outbox_id": outbox_id, "now": self.backend.time_in(self.clock())},
            lambda row: row.status is OutboxStatus.COMPLETED,
        )

    async def mark_failed(self, outbox_id: str, reason: str, retry_at: int | None) -> OutboxEntry:
        if not reason:
            raise InvalidRecord("a failure names its reason")
        if retry_at is not None:
            return await self.move_row(
                self.st.outbox_retry,
                {
                    "outbox_id": outbox_id,
                    "retry_at": self.backend.time_in(retry_at),
                    "reason": reason,
                },
                lambda row: False,
            )
        return await self.move_row(
            self.st.outbox_fail,
            {"outbox_id": outbox_id, "now": self.backend.time_in(self.clock()), "reason": reason},
            lambda row: row.status is OutboxStatus.FAILED and row.last_failure == reason,
        )

    async def mark_outcome_unknown(self, outbox_id: str, remote_ref: str | None) -> OutboxEntry:
        """One compare-and-swap: dispatching -> outcome_unknown, or the first remote reference
        of an unknown outcome filled in; the same report again is accepted."""
        return await self.move_row(
            self.st.outbox_unknown,
            {"outbox_id": outbox_id, "remote_ref": remote_ref},
            lambda row: (
                row.status is OutboxStatus.OUTCOME_UNKNOWN
                and (remote_ref is None or remote_ref == row.remote_ref)
            ),
        )

    async def reschedule(self, outbox_id: str, at: int) -> OutboxEntry:
        return await self.move_row(
            self.st.outbox_reschedule,
            {"outbox_id": outbox_id, "at": self.backend.time_in(at)},
            lambda row: False,
        )

    async def release_expired_claims(self, claimed_before: int) -> int:
        params = {"before": self.backend.time_in(claimed_before)}
        (result,) = await self.write([_Step(self.st.outbox_release, params)])
        return int(result.rowcount)

    # --- replay records -------------------------------------------------------------------------

    def replay_steps(self, record: ReplayRecord) -> list[_Step]:
        if record.replay_token != derive_replay_token(record.turn_id):
            return [_refuse(InvalidRecord("the replay token is not derived from the turn id"))]
        text = document(record)
        key = {"account_id": record.account_id, "turn_id": record.turn_id}

        async def judge(result: Result | None, prior: Row | None) -> None:
            assert result is not None
            if result.rows:
                return
            if prior is not None and prior["record"] == text:
                return
            raise Conflict("the turn's replay record is final or belongs to another conversation")

        params = self.codec.replay_params(record, text)
        return [_Step(self.st.replay_put, params, judge, self.st.replay_get, key)]

    async def put_replay(self, record: ReplayRecord) -> None:
        await self.write(self.replay_steps(record))

    async def replay_record(self, statement: Statement, params: dict[str, Any]) -> ReplayRecord:
        row = _first(await self.fetch(statement, params))
        if row is None:
            raise NotFound()
        return self.codec.replay(row)

    async def replay_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[ReplayRecord, ...]:
        rows = await self.fetch(
            self.st.replay_of_conversation,
            {"account_id": account_id, "conversation_id": conversation_id},
        )
        return tuple(self.codec.replay(row) for row in rows)

    async def last_replay_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> ReplayRecord | None:
        row = _first(
            await self.fetch(
                self.st.replay_last_of_conversation,
                {"account_id": account_id, "conversation_id": conversation_id},
            )
        )
        return None if row is None else self.codec.replay(row)

    # --- commit ---------------------------------------------------------------------------------

    def _fault(self, point: FaultPoint) -> _Step:
        """A fault point inside the bundle's open transaction: firing it leaves nothing."""
        return _check(lambda: self.faults.reach(point))

    async def commit(self, bundle: CommitBundle, enlisted: Any = None) -> CommitResult:
        """The bundle in one transaction, in its normative order; fault points fire after the
        stage they name, inside the transaction (as memory's do). With `enlisted` (a caller's
        driver connection inside its own open transaction) the bundle joins that transaction."""
        bundle.require_valid()
        account_id = bundle.account_id
        steps: list[_Step] = []
        for completion in bundle.journal_completions:
            steps.extend(self.complete_steps(account_id, completion.command_id, completion.outcome))
        if bundle.journal_completions:
            steps.append(self._fault(FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT))
        first_event = len(steps)
        if bundle.events:
            steps.extend(self.append_steps(bundle.events))
            steps.append(self._fault(FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK))
        first_finish = len(steps)
        for finish in bundle.interaction_finishes:
            steps.extend(
                self.finish_steps(
                    account_id,
                    finish.interaction_id,
                    finish.status,
                    finish.option_id,
                    finish.event_ids,
                )
            )
        first_invalidation = len(steps)
        for invalidation in bundle.invalidations:
            steps.extend(
                self.invalidate_steps(
                    account_id, invalidation.case_key, invalidation.current_revision
                )
            )
        first_insert = len(steps)
        for card in bundle.interaction_inserts:
            steps.extend(self.insert_steps(card))
        if bundle.interaction_inserts:
            steps.append(self._fault(FaultPoint.AFTER_INTERACTION_PERSISTENCE))
        for row in bundle.outbox:
            steps.extend(self.enqueue_steps(row))
        if bundle.replay is not None:
            steps.extend(self.replay_steps(bundle.replay))
        if bundle.phase is not None:
            steps.extend(self.phase_steps(account_id, bundle.turn_id, bundle.phase))
        if enlisted is None:
            values = await self.write(steps)
        else:
            values = await self.write_enlisted(enlisted, steps)
        events = self.sequenced(bundle.events, values[first_event:first_finish])
        invalidated = [
            interaction_id
            for ids in values[first_invalidation:first_insert]
            for interaction_id in ids
        ]
        return CommitResult(events=events, invalidated=tuple(invalidated))


# --- roles --------------------------------------------------------------------------------------


class _Role:
    def __init__(self, engine: _Engine) -> None:
        self._engine = engine


class SqlConversations(_Role):
    async def get_conversation(self, account_id: str, conversation_id: str) -> ConversationRecord:
        return await self._engine.get_conversation(account_id, conversation_id)

    async def get_user_turn(self, account_id: str, turn_id: str) -> UserTurnRecord:
        return await self._engine.get_user_turn(account_id, turn_id)

    async def get_assistant_turn(self, account_id: str, turn_id: str) -> AssistantTurn:
        return await self._engine.get_assistant_turn(account_id, turn_id)

    async def list_turns(self, account_id: str, conversation_id: str) -> tuple[UserTurnRecord, ...]:
        return await self._engine.list_turns(account_id, conversation_id)

    async def get_phase(self, account_id: str, turn_id: str) -> PhaseMarker:
        return await self._engine.get_phase(account_id, turn_id)

    async def list_unfinished_turns(self, limit: int) -> tuple[PhaseMarker, ...]:
        return await self._engine.list_unfinished_turns(limit)

    async def ensure_conversation(
        self, account_id: str, conversation_id: str
    ) -> ConversationRecord:
        return await self._engine.ensure_conversation(account_id, conversation_id)

    async def append_user_turn(self, record: UserTurnRecord) -> None:
        await self._engine.append_user_turn(record)

    async def append_assistant_turn(
        self, account_id: str, turn: AssistantTurn, *, phase: TurnPhase | None = None
    ) -> None:
        self._engine.faults.reach(FaultPoint.BEFORE_RESPONSE_PERSISTENCE)
        await self._engine.append_assistant_turn(account_id, turn, phase)

    async def set_phase(self, account_id: str, turn_id: str, phase: TurnPhase) -> PhaseMarker:
        return await self._engine.set_phase(account_id, turn_id, phase)


class SqlInteractions(_Role):
    async def get(self, account_id: str, interaction_id: str) -> Interaction:
        return await self._engine.get_card(account_id, interaction_id)

    async def open_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[Interaction, ...]:
        return await self._engine.open_for_conversation(account_id, conversation_id)

    async def for_case(self, account_id: str, case_key: CaseKey) -> tuple[Interaction, ...]:
        return await self._engine.cards_of_case(account_id, case_key)

    async def insert(self, interaction: Interaction) -> Interaction:
        stored = await self._engine.insert_card(interaction)
        self._engine.faults.reach(FaultPoint.AFTER_INTERACTION_PERSISTENCE)
        return stored

    async def insert_replacing_blocking(self, interaction: Interaction) -> tuple[str, ...]:
        replaced = await self._engine.insert_replacing_blocking(interaction)
        self._engine.faults.reach(FaultPoint.AFTER_INTERACTION_PERSISTENCE)
        return replaced

    async def begin_resolution(
        self, account_id: str, interaction_id: str, option_id: str
    ) -> Interaction:
        return await self._engine.begin_resolution(account_id, interaction_id, option_id)

    async def finish(
        self,
        account_id: str,
        interaction_id: str,
        status: InteractionStatus,
        option_id: str | None = None,
        event_ids: Sequence[str] = (),
    ) -> Interaction:
        return await self._engine.finish(account_id, interaction_id, status, option_id, event_ids)

    async def decline(
        self, account_id: str, interaction_id: str, option_id: str | None = None
    ) -> Interaction:
        return await self._engine.close_card(
            account_id, interaction_id, InteractionStatus.DECLINED, option_id
        )

    async def dismiss(self, account_id: str, interaction_id: str) -> Interaction:
        return await self._engine.close_card(
            account_id, interaction_id, InteractionStatus.DISMISSED, None
        )

    async def invalidate_for_revision(
        self, account_id: str, case_key: CaseKey, current_revision: int
    ) -> tuple[str, ...]:
        return await self._engine.invalidate(account_id, case_key, current_revision)

    async def invalidate_case_cards(self, account_id: str, case_key: CaseKey) -> tuple[str, ...]:
        return await self._engine.invalidate(account_id, case_key, None)

    async def expire_due(self, now: int, limit: int) -> tuple[Interaction, ...]:
        return await self._engine.expire_due(now, limit)


class SqlJournal(_Role):
    async def get(self, account_id: str, command_id: str) -> JournalEntry:
        return await self._engine.get_entry(account_id, command_id)

    async def get_by_key(self, account_id: str, idempotency_key: str) -> JournalEntry:
        return await self._engine.get_entry_by_key(account_id, idempotency_key)

    async def for_turn(self, account_id: str, turn_id: str) -> tuple[JournalEntry, ...]:
        return await self._engine.journal_for_turn(account_id, turn_id)

    async def unsettled_for_turn(self, account_id: str, turn_id: str) -> tuple[JournalEntry, ...]:
        return await self._engine.journal_for_turn(account_id, turn_id, unsettled=True)

    async def begin(self, entry: JournalEntry) -> JournalAdmission:
        self._engine.faults.reach(FaultPoint.BEFORE_JOURNAL_INSERT)
        admission = await self._engine.begin(entry)
        if isinstance(admission, Fresh):
            self._engine.faults.reach(FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT)
        return admission

    async def mark_executing(self, account_id: str, command_id: str) -> JournalEntry:
        return await self._engine.mark_executing(account_id, command_id)

    async def complete(
        self, account_id: str, command_id: str, outcome: CommandOutcome
    ) -> JournalEntry:
        return await self._engine.complete(account_id, command_id, outcome)


class SqlEvents(_Role):
    async def get_by_ids(
        self, account_id: str, event_ids: Sequence[str]
    ) -> tuple[DomainEvent, ...]:
        return await self._engine.get_events(account_id, event_ids)

    async def list_for_case(
        self, account_id: str, case_key: CaseKey, since_revision: int, limit: int
    ) -> tuple[DomainEvent, ...]:
        return await self._engine.list_for_case(account_id, case_key, since_revision, limit)

    async def read_from(self, account_id: str, cursor: EventCursor, limit: int) -> EventPage:
        return await self._engine.read_from(account_id, cursor, limit)

    async def append(
        self, account_id: str, events: Sequence[DomainEvent]
    ) -> tuple[DomainEvent, ...]:
        appended = await self._engine.append(account_id, events)
        self._engine.faults.reach(FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK)
        return appended


class SqlOutbox(_Role):
    async def get(self, outbox_id: str) -> OutboxEntry:
        return await self._engine.get_row(outbox_id)

    async def list_for_command(self, command_id: str) -> tuple[OutboxEntry, ...]:
        return await self._engine.rows_for_command(command_id)

    async def enqueue(self, entry: OutboxEntry) -> OutboxEntry:
        return await self._engine.enqueue(entry)

    async def claim_due(self, now: int, limit: int, worker_id: str) -> tuple[OutboxEntry, ...]:
        self._engine.faults.reach(FaultPoint.BEFORE_OUTBOX_DISPATCH)
        return await self._engine.claim_due(now, limit, worker_id)

    async def mark_completed(self, outbox_id: str) -> OutboxEntry:
        self._engine.faults.reach(FaultPoint.AFTER_OUTBOX_DISPATCH)
        return await self._engine.mark_completed(outbox_id)

    async def mark_failed(
        self, outbox_id: str, reason: str, retry_at: int | None = None
    ) -> OutboxEntry:
        self._engine.faults.reach(FaultPoint.AFTER_OUTBOX_DISPATCH)
        return await self._engine.mark_failed(outbox_id, reason, retry_at)

    async def mark_outcome_unknown(
        self, outbox_id: str, remote_ref: str | None = None
    ) -> OutboxEntry:
        self._engine.faults.reach(FaultPoint.AFTER_OUTBOX_DISPATCH)
        return await self._engine.mark_outcome_unknown(outbox_id, remote_ref)

    async def reschedule(self, outbox_id: str, at: int) -> OutboxEntry:
        return await self._engine.reschedule(outbox_id, at)

    async def release_expired_claims(self, claimed_before: int) -> int:
        return await self._engine.release_expired_claims(claimed_before)


class SqlReplay(_Role):
    async def get(self, account_id: str, turn_id: str) -> ReplayRecord:
        return await self._engine.replay_record(
            self._engine.st.replay_get, {"account_id": account_id, "turn_id": turn_id}
        )

    async def get_by_token(self, account_id: str, replay_token: str) -> ReplayRecord:
        return await self._engine.replay_record(
            self._engine.st.replay_get_by_token,
            {"account_id": account_id, "replay_token": replay_token},
        )

    async def for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[ReplayRecord, ...]:
        return await self._engine.replay_for_conversation(account_id, conversation_id)

    async def last_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> ReplayRecord | None:
        return await self._engine.last_replay_for_conversation(account_id, conversation_id)

    async def put(self, record: ReplayRecord) -> None:
        await self._engine.put_replay(record)


class SqlCommits(_Role):
    async def commit(self, bundle: CommitBundle) -> CommitResult:
        return await self._engine.commit(bundle)


# --- the bundle ---------------------------------------------------------------------------------


class SqlStores(Stores):
    """Every store role on one SQL database.

        stores = await SqlStores.connect("sqlite+aiosqlite:///turnframe.db")
        await stores.migrate()          # safe on every start
        ...
        await stores.aclose()

    URLs: `postgresql+psycopg://user:password@host:5432/db` (also `postgresql://`) and
    `sqlite+aiosqlite:///path/to/file.db` (also `sqlite:///…`; no path: in memory).
    """

    def __init__(
        self,
        backend: Backend,
        *,
        url: str,
        config: SqlConfig,
        clock: Clock | None = None,
        faults: FaultPlan | None = None,
    ) -> None:
        self._url = url
        self.config = config
        self.engine = _Engine(
            backend,
            statements_for(backend.dialect_name, config.schema),
            clock if clock is not None else system_clock,
            faults if faults is not None else FaultPlan(),
        )
        super().__init__(
            conversations=SqlConversations(self.engine),
            interactions=SqlInteractions(self.engine),
            journal=SqlJournal(self.engine),
            events=SqlEvents(self.engine),
            outbox=SqlOutbox(self.engine),
            replay=SqlReplay(self.engine),
            commits=SqlCommits(self.engine),
        )

    @classmethod
    async def connect(
        cls,
        url: str,
        config: SqlConfig | None = None,
        *,
        clock: Clock | None = None,
        faults: FaultPlan | None = None,
    ) -> SqlStores:
        """Open the pool (PostgreSQL) or the connections (SQLite); `Unavailable` when the
        database cannot be reached. Run `migrate()` before the first use of a new database."""
        config = config or SqlConfig()
        dialect, target = parse_url(url)
        backend: Backend
        if dialect == "postgresql":
            from turnframe_store.sql._postgres import PostgresBackend  # needs the postgres extra

            backend = await PostgresBackend.open(target, config)
        else:
            from turnframe_store.sql._sqlite import SqliteBackend

            if config.schema is not None:
                raise ValueError("SQLite has no schemas; leave SqlConfig.schema unset")
            backend = await SqliteBackend.open(target, config)
        return cls(backend, url=url, config=config, clock=clock, faults=faults)

    async def commit_in(self, connection: Any, bundle: CommitBundle) -> CommitResult:
        """Commit `bundle` inside the caller's own open transaction (DESIGN §6), so an adopter
        whose state lives in this database commits its executor's writes and the turn's bundle
        together, or neither.

        `connection` is the caller's driver connection to this same database, inside a
        transaction the caller began and will commit: a `psycopg.AsyncConnection` (PostgreSQL)
        or an `aiosqlite.Connection` (SQLite). The bundle runs behind a savepoint: when an item
        fails, its error is raised, nothing of the bundle remains, and the caller's own writes
        and transaction are untouched. Nothing is durable until the caller commits.
        """
        return await self.engine.commit(bundle, enlisted=connection)

    async def migrate(self) -> None:
        """Bring the tf_* tables to the newest revision (alembic). Safe on every start: two
        processes starting together do not race (an advisory lock on PostgreSQL, the write lock
        on SQLite)."""
        if not await self.engine.backend.create_tables():
            await asyncio.to_thread(_migrate.upgrade, self._url, self.config.schema)

    @property
    def dialect(self) -> str:
        """`postgresql` or `sqlite`."""
        return self.engine.backend.dialect_name

    @property
    def url(self) -> str:
        """The database URL, its password hidden."""
        return make_url(self._url).render_as_string(hide_password=True)

    @property
    def clock(self) -> Clock:
        return self.engine.clock

    @property
    def faults(self) -> FaultPlan:
        """Arm a fault: `stores.faults.arm(FaultPoint.BEFORE_JOURNAL_INSERT)`."""
        return self.engine.faults

    @property
    def hooks(self) -> Hooks:
        """Internal test seams inside every write transaction (see `_backend.Hooks`)."""
        return self.engine.backend.hooks

    async def aclose(self) -> None:
        await self.engine.backend.aclose()
