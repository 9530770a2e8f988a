"""How the SQL store writes (internal): a write is a list of steps, judged in order.

- Every write is one transaction. Compare-and-swap lives in the writing statement (an UPDATE that
  names the state it expects and returns the row it moved); a SELECT right after it reads the row
  back, and when the statement moved nothing, the rule `roles` states for that write judges the
  row read back, exactly as memory judges its stored record: `NotFound`, an accepted repeat, or
  the refusal.
- A step (`Step`) is a statement, its read-back and the judge of their results. The statements
  of one write go to PostgreSQL in one pipeline; the judges then read the results in order, each
  on the state as of its own step (never what later steps made of its row), so the first failing
  step is the one reported, as in memory. A step whose statement the database refuses aborts the
  transaction; the steps before it are judged afterwards on their own results.
- A statement that must run at commit (`Step.at_commit`: the event order, taken under a lock)
  is kept on the connection once its step was judged, and sent with COMMIT in the
  transaction's last pipeline (`_backend.AtCommit`).
- A write that depends on what a step read (which rows to insert) is that step's judge's
  answer, `Then`: sent after the batch was judged, in the same transaction, as one statement
  run once per row.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn, TypeVar, cast

from turnframe_store._transaction import TransactionState
from turnframe_store.clock import Clock
from turnframe_store.errors import Conflict, StoreError
from turnframe_store.faults import FaultPlan
from turnframe_store.roles import rules
from turnframe_store.roles.rules import Verdict
from turnframe_store.sql._backend import (
    AtCommit,
    Backend,
    Batch,
    Connection,
    Many,
    Params,
    Result,
    Row,
    Statement,
)
from turnframe_store.sql._rows import Codec
from turnframe_store.sql._statements import Compiler

__all__ = [
    "Judge",
    "Retry",
    "SqlCore",
    "Step",
    "Then",
    "Transaction",
    "TxCore",
    "check",
    "first",
    "refuse",
]

R = TypeVar("R")
X = TypeVar("X")

#: How often a read-decide-write is retried when a concurrent writer moved its row in between.
_RETRIES: Final = 5

#: A step's judge: the result of its statement, and its row as the step left it (read back
#: right after the statement, before any later step of the same write ran), when it reads one.
Judge = Callable[[Result | None, Row | None], Awaitable[Any]]


async def _accept(result: Result | None, prior: Row | None) -> Result | None:
    return result


@dataclass
class Step:
    """One step of a write: a statement (or none: a check made in order) and its judge.

    `read` (with `read_params`) reads the step's row back right after its statement, in the same
    batch: a judge whose statement moved nothing decides on the row as of its own step, never on
    what later steps of the write made of it."""

    statement: Statement | None
    params: dict[str, Any] = field(default_factory=dict)
    judge: Judge = _accept
    read: Statement | None = None
    read_params: dict[str, Any] = field(default_factory=dict)
    #: statements sent with COMMIT once the step was judged: `(lock, [(statement, params,
    #: receiver)])`, the lock sent once per transaction before all of them (`AtCommit`)
    at_commit: tuple[Statement, list[tuple[Statement, Params, Callable[[Result], None]]]] | None = (
        None
    )


@dataclass(frozen=True)
class Then:
    """A judge's answer that writes: `statement` once per row of `rows`, after the judged batch
    and in its transaction (none for no rows); the step's value is then `value`. A failure of
    the statement fails the write."""

    statement: Statement
    rows: list[dict[str, Any]]
    value: Any = None


def check(test: Callable[[], object]) -> Step:
    """A step without a statement: `test` raises to stop the write at this point of the order."""

    async def judge(result: Result | None, prior: Row | None) -> None:
        test()

    return Step(None, judge=judge)


def refuse(error: StoreError) -> Step:
    def test() -> None:
        raise error

    return check(test)


def first(rows: Sequence[Row]) -> Row | None:
    return rows[0] if rows else None


class _Aborted(Exception):
    """The database refused a statement of the batch; the transaction is rolled back."""

    def __init__(self, steps: Sequence[Step], batch: Batch, *, readbacks: bool = True) -> None:
        super().__init__("aborted")
        self.steps = steps
        self.batch = batch
        #: whether the batch carried each step's read-back after its statement
        self.readbacks = readbacks


class _Readbacks(Exception):
    """An optimistic batch needs its read-backs: undo it and run it again eagerly."""


#: Set while a batch runs again with every read-back.
_EAGER: ContextVar[bool] = ContextVar("turnframe_sql_eager_readbacks", default=False)


class Retry(Exception):
    """A concurrent writer moved a row between this write's read and its compare-and-swap."""


class SqlCore:
    """The backend, the compiler, the codec, the clock and the fault plan the roles share."""

    def __init__(self, backend: Backend, sql: Compiler, clock: Clock, faults: FaultPlan) -> None:
        self.backend = backend
        self.sql = sql
        self.clock = clock
        self.faults = faults
        self.codec = Codec(backend.time_in, backend.time_out)

    def now(self) -> Any:
        """The store clock's time as the database stores it."""
        return self.backend.time_in(self.clock())

    async def fetch(self, statement: Statement, params: dict[str, Any]) -> list[Row]:
        async with self.backend.reading() as connection:
            return await connection.fetch(statement, params)

    async def fetch_one(self, statement: Statement, params: dict[str, Any]) -> Row:
        """The one row `statement` reads, or `NotFound`."""
        return rules.found(first(await self.fetch(statement, params)))

    def cas(
        self,
        statement: Statement,
        params: dict[str, Any],
        read: Statement,
        read_params: dict[str, Any],
        decode: Callable[[Row], X],
        rule: Callable[[X], Verdict],
        moved: Callable[[X], object] | None = None,
    ) -> Step:
        """A compare-and-swap step. The UPDATE returned the row it moved (`moved`, when given,
        checks what the WHERE clause cannot), or it moved nothing and `rule` judges the row read
        back: a repeat returns it, a refusal raises. A row the rule would move, yet the UPDATE
        did not, was moved by a concurrent writer: `Conflict`."""

        async def judge(result: Result | None, prior: Row | None) -> X:
            assert result is not None
            if result.rows:
                record = decode(result.rows[0])
                if moved is not None:
                    moved(record)
                return record
            record = decode(rules.found(prior))
            if rule(record) is Verdict.REPEAT:
                return record
            raise Conflict("the record moved under a concurrent writer")

        return Step(statement, params, judge, read, read_params)

    async def apply(self, connection: Connection, steps: Sequence[Step]) -> list[Any]:
        """Run the steps' statements as one batch on `connection`, then judge them in order.

        Optimistic first: a read-back is needed only by a statement that moved nothing, so the
        batch goes without them; when one is needed (or a statement failed) `_Readbacks` asks
        the caller to undo the batch and run it again eagerly, each statement followed by its
        read-back, so every judge sees its row as of its own step."""
        if _EAGER.get() or not any(s.read is not None and s.statement for s in steps):
            return await self._apply_eagerly(connection, steps)
        return await self._apply_optimistically(connection, steps)

    async def _apply_optimistically(
        self, connection: Connection, steps: Sequence[Step]
    ) -> list[Any]:
        batch = [(s.statement, s.params) for s in steps if s.statement is not None]
        outcome = await connection.run(batch)
        results, stop = outcome.results, outcome.failed_at
        at = 0
        for step in steps:  # a statement before the stop that moved nothing needs its read-back
            if step.statement is None:
                continue
            if stop is not None and at >= stop:
                break
            if step.read is not None and not results[at].rows:
                raise _Readbacks()
            at += 1
        if stop is not None:
            raise _Aborted(steps, outcome, readbacks=False)
        values = await self._judge(steps, results, None, readbacks=False)
        _keep_for_commit(connection, steps)
        return await _then(connection, values)

    async def _apply_eagerly(self, connection: Connection, steps: Sequence[Step]) -> list[Any]:
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
        values = await self._judge(steps, outcome.results, None)
        _keep_for_commit(connection, steps)
        return await _then(connection, values)

    @staticmethod
    async def _judge(
        steps: Sequence[Step],
        results: Sequence[Result],
        stop_at: int | None,
        *,
        readbacks: bool = True,
    ) -> list[Any]:
        """Judge the steps in order on their results; with `stop_at`, only the steps whose
        statements all ran before the statement at that index. Without `readbacks` the batch
        was sent without them (no judge needed one)."""
        values: list[Any] = []
        at = 0
        for step in steps:
            if step.statement is None:
                values.append(await step.judge(None, None))
                continue
            read = readbacks and step.read is not None
            width = 2 if read else 1
            if stop_at is not None and at + width > stop_at:
                break
            prior = first(results[at + 1].rows) if read else None
            values.append(await step.judge(results[at], prior))
            at += width
        return values

    async def transaction(self, body: Callable[[Connection], Awaitable[R]]) -> R:
        """Run `body` in one write transaction; run again when it raises `Retry` (a concurrent
        writer moved a row) or `_Readbacks` (then with every read-back)."""
        token = None
        try:
            for _ in range(_RETRIES):
                try:
                    try:
                        async with self.backend.writing() as connection:
                            return await body(connection)
                    except _Aborted as aborted:
                        await self._judge_aborted(aborted)
                except Retry:
                    continue
                except _Readbacks:
                    token = token or _EAGER.set(True)
                    continue
        finally:
            if token is not None:
                _EAGER.reset(token)
        raise Conflict("the record kept changing under a concurrent writer")

    async def _judge_aborted(self, aborted: _Aborted) -> NoReturn:
        """Judge the steps before the refused statement (each on its own results and read-back)
        and raise the first failure among them, else the refused statement's own error."""
        batch = aborted.batch
        assert batch.failed_at is not None and batch.error is not None
        await self._judge(
            aborted.steps, batch.results, batch.failed_at, readbacks=aborted.readbacks
        )
        raise batch.error from None

    def defer(self, fault: StoreError) -> None:
        """A fault that fires once the write committed: this write committed on its own."""
        raise fault

    async def write(self, steps: Sequence[Step]) -> list[Any]:
        async def body(connection: Connection) -> list[Any]:
            return await self.apply(connection, steps)

        return await self.transaction(body)

    async def write_enlisted(self, raw: Any, steps: Sequence[Step]) -> list[Any]:
        """The steps inside a caller's open transaction on `raw`, behind a savepoint: if a step
        fails, nothing of them remains, and the caller's transaction stays usable."""
        for eager in (False, True):
            token = _EAGER.set(eager)
            try:
                async with self.backend.enlisted(raw) as connection:
                    return await self.apply(connection, steps)
            except _Readbacks:
                continue  # the savepoint undid the batch: run it again with its read-backs
            except _Aborted as aborted:
                await self._judge_aborted(aborted)
            except Retry:
                raise Conflict("a record moved under a concurrent writer") from None
            finally:
                _EAGER.reset(token)
        raise AssertionError("an eager batch never asks for its read-backs")


def _keep_for_commit(connection: Connection, steps: Sequence[Step]) -> None:
    """Keep the judged steps' statements for the transaction's COMMIT (`Step.at_commit`)."""
    for step in steps:
        if step.at_commit is None:
            continue
        kept = connection.at_commit
        if kept is None:
            raise RuntimeError("a statement for COMMIT outside a write transaction of ours")
        head, tail = step.at_commit
        kept.head = head
        kept.tail.extend(tail)


async def _then(connection: Connection, values: list[Any]) -> list[Any]:
    """Run the writes the judges answered with (`Then`), in step order; each gives its value."""
    for at, value in enumerate(values):
        if isinstance(value, Then):
            if value.rows:
                outcome = await connection.run([(value.statement, Many(value.rows))])
                if outcome.error is not None:
                    raise outcome.error
            values[at] = value.value
    return values


#: One open `SqlStores.transaction()`.
Transaction = TransactionState


class _Prepending(Connection):
    """A connection that sends statements queued with `later` in front of the next batch, so a
    savepoint costs no round trip of its own."""

    def __init__(self, inner: Connection) -> None:
        self.inner = inner
        self.queued: list[Statement] = []
        self.at_commit: AtCommit | None = inner.at_commit

    def later(self, statement: Statement) -> None:
        self.queued.append(statement)

    async def run(
        self,
        batch: Sequence[tuple[Statement, Params | Many]],
        readbacks: frozenset[int] = frozenset(),
    ) -> Batch:
        if not self.queued:
            return await self.inner.run(batch, readbacks)
        head: list[tuple[Statement, Params | Many]] = [(s, {}) for s in self.queued]
        self.queued = []
        n = len(head)
        outcome = await self.inner.run([*head, *batch], frozenset(i + n for i in readbacks))
        if outcome.failed_at is not None and outcome.failed_at < n:
            return Batch([], 0, outcome.error)
        failed = None if outcome.failed_at is None else outcome.failed_at - n
        return Batch(outcome.results[n:], failed, outcome.error)


_UNDO_POINT = Statement("undo_point", "SAVEPOINT tf_undo_point")
_BACK_TO_UNDO_POINT = Statement("back_to_undo_point", "ROLLBACK TO SAVEPOINT tf_undo_point")
_RELEASE_UNDO_POINT = Statement("release_undo_point", "RELEASE SAVEPOINT tf_undo_point")
_BEGUN = Statement("begun", "SELECT 1", ("one",))


class TxCore(SqlCore):
    """A core bound to one open transaction's connection: every read and write joins it, and a
    store error from either dooms it (the database may already have aborted it)."""

    def __init__(self, parent: SqlCore, connection: Connection, tx: Transaction) -> None:
        self.backend = parent.backend
        self.sql = parent.sql
        self.clock = parent.clock
        self.faults = parent.faults
        self.codec = parent.codec
        self._connection = _Prepending(connection)
        self._tx = tx
        self._savepoints = 0

    def defer(self, fault: StoreError) -> None:
        """A fault that fires once the write committed: when the open transaction does."""
        self._tx.after_commit = fault

    async def apply(self, connection: Connection, steps: Sequence[Step]) -> list[Any]:
        """As `SqlCore.apply`, inside the open transaction: a batch of several statements goes
        behind a savepoint (sent with it), so asking for its read-backs can undo it alone; once
        the batch stands, the savepoint is released with the next batch (or ends with COMMIT),
        so later writes never run in a subtransaction of it."""
        if _EAGER.get() or not any(s.read is not None and s.statement for s in steps):
            return await self._apply_eagerly(connection, steps)
        several = sum(1 for s in steps if s.statement is not None) > 1
        if several:
            self._connection.later(_UNDO_POINT)
        try:
            values = await self._apply_optimistically(connection, steps)
            if several:
                self._connection.later(_RELEASE_UNDO_POINT)
            return values
        except _Readbacks:
            if several:
                outcome = await self._connection.inner.run([(_BACK_TO_UNDO_POINT, {})])
                if outcome.error is not None:
                    raise outcome.error from None
                self._connection.later(_RELEASE_UNDO_POINT)
            return await self._apply_eagerly(connection, steps)

    def later(self, statement: Statement) -> None:
        """Send `statement` in front of the transaction's next batch."""
        self._connection.later(statement)

    async def write_enlisted(self, raw: Any, steps: Sequence[Step]) -> list[Any]:
        raise RuntimeError(
            "commit_in joins the caller's own transaction; inside Stores.transaction() use "
            "commits.commit"
        )

    async def driver_connection(self) -> Any:
        """The open transaction's own driver connection, begun, every statement queued for it
        sent: an executor's writes through it commit with the transaction, or roll back."""
        self._tx.usable()
        connection = self._connection
        if connection.queued or not getattr(connection.inner, "begun", True):
            outcome = await connection.run(() if connection.queued else ((_BEGUN, {}),))
            if outcome.error is not None:
                self._tx.failure = outcome.error
                raise outcome.error
        return cast(Any, connection.inner).raw

    @contextlib.asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        """A nested unit (see `Stores.savepoint`). SAVEPOINT travels with the next batch; when
        nothing was sent inside, there is nothing to roll back."""
        tx = self._tx
        tx.usable()
        self._savepoints += 1
        name = f"tf_sp_{self._savepoints}"
        connection = self._connection
        connection.later(Statement("savepoint", f"SAVEPOINT {name}"))
        # what the savepoint undoes is not ordered at commit either
        kept = connection.at_commit.tail if connection.at_commit is not None else []
        depth = len(kept)
        try:
            yield
        except BaseException as exc:
            del kept[depth:]
            try:
                await self._roll_back_to(name)
            except StoreError:
                if not isinstance(exc, Exception):
                    raise exc from None  # a cancellation stays a cancellation
                raise
            raise
        if tx.failure is not None:
            failure = tx.failure
            await self._roll_back_to(name)
            del kept[depth:]
            raise Conflict("the savepoint was rolled back: a call in it failed") from failure
        if connection.queued and connection.queued[-1].sql == f"SAVEPOINT {name}":
            connection.queued.pop()  # nothing was sent inside it

    async def _roll_back_to(self, name: str) -> None:
        connection = self._connection
        if connection.queued and connection.queued[-1].sql == f"SAVEPOINT {name}":
            connection.queued.pop()
        else:
            # a release still queued is of an undo point set inside this savepoint: gone with it
            connection.queued = [s for s in connection.queued if s is not _RELEASE_UNDO_POINT]
            outcome = await connection.inner.run(
                [(Statement("rollback_to", f"ROLLBACK TO SAVEPOINT {name}"), {})]
            )
            if outcome.error is not None:
                self._tx.failure = outcome.error
                raise outcome.error
        self._tx.failure = None

    async def fetch(self, statement: Statement, params: dict[str, Any]) -> list[Row]:
        self._tx.usable()
        try:
            return await self._connection.fetch(statement, params)
        except StoreError as exc:
            self._tx.failure = exc
            raise

    async def transaction(self, body: Callable[[Connection], Awaitable[R]]) -> R:
        self._tx.usable()
        try:
            try:
                return await body(self._connection)
            except _Aborted as aborted:
                await self._judge_aborted(aborted)
        except Retry:
            error = Conflict("a record moved under a concurrent writer")
            self._tx.failure = error
            raise error from None
        except StoreError as exc:
            self._tx.failure = exc
            raise
