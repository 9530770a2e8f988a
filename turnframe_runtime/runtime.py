"""`TurnRuntime`: one user turn in, one persisted `AssistantTurn` out (DESIGN §5, steps A-V).

The order is the safety property:
- read and judge first (conversation, cases, the card answer): a refused answer writes nothing;
- accept the turn, then understand (a click-only turn makes no model call), then reduce the WHOLE
  turn before any effect;
- claim the answered card, persist pre-execution cards, journal every command before it runs,
  execute batches, and write ONE all-or-nothing commit bundle;
- re-project, persist follow-up cards, compose from events read back from the committed ledger,
  guard the claims, persist the exact turn, then report it.

Each stage lives in its own module, named for what it owns; this one only wires them in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType
from typing import Any

from turnframe_core import codes
from turnframe_core.cases import CaseKey
from turnframe_core.claims import ClaimGuardViolation
from turnframe_core.errors import TurnframeError
from turnframe_core.events import DomainEvent
from turnframe_core.ids import IdSource, UlidIdSource
from turnframe_core.interactions import Interaction
from turnframe_core.replay import ReplayRecord, TurnPhase
from turnframe_core.stream import StreamEvent, StreamMode
from turnframe_core.stream import TurnFailed as TurnFailedEvent
from turnframe_core.turn import AssistantTurn, InvalidTurnInput, TurnInput
from turnframe_core.understanding import Understanding
from turnframe_core.wording import ClaimClass
from turnframe_core.workflow import (
    DeclaresCopy,
    DeclaresCopySamples,
    DeclaresFollowUps,
    DeclaresReceiptClaims,
    DeclaresReceiptTemplates,
    WorkflowDefinition,
)
from turnframe_runtime import observe
from turnframe_runtime.accept import PreviousTurnUnfinished, accept_turn, prior_reply
from turnframe_runtime.audit import Audit, audit_turn
from turnframe_runtime.card_answer import (
    Admitted,
    AnsweredBefore,
    CardAnswer,
    CardPlan,
    ClaimedCard,
    Closed,
    admit_card_answer,
    claim_card,
    plan_card_answer,
)
from turnframe_runtime.cards import CardFactory, RaisedCard, persist_card
from turnframe_runtime.cases import CaseBook
from turnframe_runtime.compose import Composer, TurnResult
from turnframe_runtime.config import OutboxConfig, RuntimeConfig
from turnframe_runtime.context import AuditTrail, Notes, Purpose, TurnContext
from turnframe_runtime.copy import (
    CopyDrift,
    MissingCopy,
    RecordingCopy,
    ServerCopy,
    drift,
    library_copy,
    receipt_title,
)
from turnframe_runtime.errors import (
    ConversationBusy,
    ReviewerRequired,
    StoresWithoutTransactions,
    TurnFailed,
    TurnInProgress,
    UnknownWorkflow,
)
from turnframe_runtime.execute import Execution
from turnframe_runtime.follow import Followers
from turnframe_runtime.follow_up import FollowUp
from turnframe_runtime.narration import Narration
from turnframe_runtime.outbox.dispatch import OutboxDispatcher
from turnframe_runtime.outbox.ports import OutboxSender
from turnframe_runtime.ports import (
    CaseDirectory,
    ClaimReviewer,
    Interpreter,
    Narrator,
    WorkflowExecutor,
)
from turnframe_runtime.record import Recorder
from turnframe_runtime.recover import RecoveredTurn, Recovery, RecoveryReport
from turnframe_runtime.reduce import (
    CaseInView,
    Plan,
    PlannedCommand,
    reduce_turn,
    target_resolutions,
)
from turnframe_runtime.stream import StreamHub, TurnEvents
from turnframe_runtime.understand import understand
from turnframe_store.bundle import Stores
from turnframe_store.errors import Busy, Conflict, StoreError, Timeout
from turnframe_store.records import UserTurnRecord

__all__ = ["TurnInProgress", "TurnRuntime", "UnknownWorkflow"]


class TurnRuntime:
    """Runs conversational turns safely. Build one per process and share it; its collaborators
    are fixed at construction."""

    def __init__(
        self,
        *,
        stores: Stores,
        workflows: Sequence[WorkflowDefinition],
        directory: CaseDirectory,
        executor: WorkflowExecutor,
        interpreter: Interpreter | None = None,
        narrator: Narrator | None = None,
        reviewer: ClaimReviewer | None = None,
        copy: ServerCopy | None = None,
        config: RuntimeConfig | None = None,
        clock: Callable[[], int] | None = None,
        ids: IdSource | None = None,
        senders: Mapping[str, OutboxSender] | None = None,
        outbox: OutboxConfig | None = None,
    ) -> None:
        by_key = {w.key: w for w in workflows}
        if len(by_key) != len(workflows):
            raise ValueError("workflow keys must be unique")
        if not stores.transactional:
            raise StoresWithoutTransactions(
                "these stores cannot commit a turn's writes together; use MemoryStores, "
                "SqlStores or stores whose transaction() passes the conformance suite"
            )
        self._stores = stores
        self._workflows: Mapping[str, WorkflowDefinition] = MappingProxyType(by_key)
        self._directory = directory
        self._executor = executor
        self._interpreter = interpreter
        if reviewer is None:  # a narrator may ship its own reviewer, a port of its own
            offered = getattr(narrator, "reviewer", None)
            reviewer = offered if callable(getattr(offered, "review", None)) else None
        if narrator is not None and reviewer is None:
            raise ReviewerRequired(
                "a narrator's prose is reviewed by a separate ClaimReviewer; pass reviewer="
            )
        self._narrator = narrator
        self._reviewer = reviewer
        self._follow_up_codes = frozenset(
            code
            for workflow in workflows
            if isinstance(workflow, DeclaresFollowUps)
            for code in workflow.follow_up_receipts()
        )
        self._receipt_claims: Mapping[str, tuple[ClaimClass, ...]] = MappingProxyType(
            {
                code: tuple(classes)
                for workflow in workflows
                if isinstance(workflow, DeclaresReceiptClaims)
                for code, classes in workflow.receipt_claims().items()
            }
        )
        self._config = config or RuntimeConfig()
        # A turn renders only in a locale the runtime declares (its fallback chain ends in the
        # default locale), and every declared locale is checked whole below.
        self._copy: ServerCopy = (copy or library_copy()).serving(self._config.locales)
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._ids = ids or UlidIdSource(self._clock)
        required = [
            *(
                receipt_title(template)
                for workflow in workflows
                if isinstance(workflow, DeclaresReceiptTemplates)
                for template in workflow.receipt_templates()
            ),
            *(
                template
                for workflow in workflows
                if isinstance(workflow, DeclaresCopy)
                for template in workflow.copy_templates()
            ),
        ]
        samples: dict[str, Sequence[Mapping[str, Any]]] = {}
        for workflow in workflows:
            if isinstance(workflow, DeclaresCopySamples):
                samples.update(workflow.copy_samples())
        missing = self._copy.missing(self._config.locales, required=required, samples=samples)
        if missing:
            raise MissingCopy(missing)
        self._outbox = OutboxDispatcher(self, senders or {}, outbox)
        self._hub = StreamHub()
        self._followers = Followers(stores, self._hub, self._config)
        self._running: set[asyncio.Task[AssistantTurn]] = set()

    @property
    def stores(self) -> Stores:
        return self._stores

    @property
    def workflows(self) -> Mapping[str, WorkflowDefinition]:
        return self._workflows

    @property
    def directory(self) -> CaseDirectory:
        return self._directory

    @property
    def executor(self) -> WorkflowExecutor:
        return self._executor

    @property
    def outbox(self) -> OutboxDispatcher:
        """Carries out this runtime's outbox rows with its `senders` (the dispatch and reconcile
        actors call it; `turnframe worker` runs them with a relay)."""
        return self._outbox

    @property
    def config(self) -> RuntimeConfig:
        return self._config

    # --- public API -----------------------------------------------------------------------------

    async def load_turn(self, account_id: str, turn_id: str) -> AssistantTurn:
        """The stored assistant turn, exactly as it was returned."""
        return await self._stores.conversations.get_assistant_turn(account_id, turn_id)

    async def load_conversation(
        self, account_id: str, conversation_id: str, limit: int = 20
    ) -> tuple[AssistantTurn, ...]:
        """The conversation's last `limit` assistant turns, oldest first, exactly as returned."""
        return await self._stores.conversations.recent_turns(account_id, conversation_id, limit)

    async def replay(self, account_id: str, replay_token: str) -> ReplayRecord:
        """The turn's audit record (read-only: executes nothing, calls no model)."""
        return await self._stores.replay.get_by_token(account_id, replay_token)

    async def audit(self, account_id: str, replay_token: str) -> Audit:
        """The turn's audit (DESIGN §11): the ten audit questions answered from stored data, and
        every digest verified (its record against its chain link, the conversation's chain, the
        understanding and plan hashes, the reply against its record). Read-only: it executes
        nothing, calls no model and writes nothing."""
        return await audit_turn(self._stores, account_id, replay_token)

    async def rerender(self, account_id: str, replay_token: str) -> list[CopyDrift]:
        """Drift of a turn's server copy: each sentence it rendered, rendered again from the same
        template and parameters in the same locale with today's copy, reported where the text,
        the template or the catalog differs. Read-only; replay itself never re-renders."""
        record = await self._stores.replay.get_by_token(account_id, replay_token)
        return drift(self._copy, record.copy_renders)

    async def handle_turn(self, turn_input: TurnInput) -> AssistantTurn:
        """Run one turn end to end and return the AssistantTurn it persisted.

        A turn commits at its durable points (decision 0006): accept; start (the card claimed,
        pre-execution cards, every command journaled); commit (the bundle, the events read back,
        follow-up cards); deliver. A click-only turn makes no model call, so it accepts and
        starts in one transaction; without a narrator the reply is delivered with the commit.
        """
        turn_input = self._judged(turn_input)
        async with self._conversation(turn_input.account_id, turn_input.conversation_id):
            return await self._handle(turn_input)

    async def stream_turn(
        self, turn_input: TurnInput, mode: StreamMode | str = StreamMode.WHOLE
    ) -> AsyncIterator[StreamEvent]:
        """Run one turn as `handle_turn` does and yield its stream events as they are logged
        (DESIGN §8): `turn.phase` and `turn.step` as the turn reaches each durable point, then
        (from the commit on) its blocks, then `turn.completed` with the stored turn, equal to
        what `handle_turn` returns; or `turn.failed` with a stable code, and no block.

        `mode` `whole` (the default) sends each block complete; `tokens` also sends model
        prose as deltas, after the commit and after review passed the whole block. The turn runs
        on whatever the reader does: one that stops reading (a client that went away) leaves it
        running to its end, and `resume_stream` gives the rest. The same request again (a
        client's retry) yields the stream the turn logged, even one that ended `turn.failed`.
        A refused turn raises as `handle_turn` would, before any event; a failure that leaves
        the turn to recovery raises after the events logged before it (`StreamInterrupted` when
        the turn's task was cancelled)."""
        turn_input = self._judged(turn_input)
        mode = StreamMode(mode)
        turn_id = turn_input.turn_id or self._ids.new_id("turn")
        account_id = turn_input.account_id

        accepted = asyncio.Event()

        async def run() -> AssistantTurn:
            async with self._conversation(account_id, turn_input.conversation_id):
                return await self._handle(turn_input, turn_id, mode, on_accepted=accepted)

        task = asyncio.ensure_future(run())
        self._running.add(task)  # the turn outlives a reader that stops
        task.add_done_callback(partial(self._ran, account_id, turn_id))
        # Nothing is read before the turn was accepted as this request (a reused turn id must
        # not show another request's stream).
        waiting = asyncio.ensure_future(accepted.wait())
        try:
            await asyncio.wait((task, waiting), return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
        if not accepted.is_set():
            try:
                await task  # raises the refusal; a refused turn logged nothing
            except TurnFailed:
                # The same request, for a turn that ended failed: the stream it logged.
                tail = await self._stores.conversations.stream_tail(account_id, turn_id)
                if not isinstance(tail, TurnFailedEvent):
                    raise
                async for event in self._followers.follow(account_id, turn_id, 0, follow=False):
                    yield event
                return
        async for event in self._followers.follow(account_id, turn_id, 0, task):
            yield event

    async def resume_stream(
        self, account_id: str, turn_id: str, after_sequence: int = 0, *, follow: bool = True
    ) -> AsyncIterator[StreamEvent]:
        """The turn's stream events after `after_sequence` (0: from the start), exactly as they
        were published, in order; from any process sharing the stores. With `follow`, waits for
        the events of a turn still running (or being recovered) until its `turn.completed` or
        `turn.failed`; without, yields what is logged now. `NotFound` for a turn this account
        does not have; `StreamExpired` for a finished turn whose log was pruned
        (`RuntimeConfig.stream_retention_ms`)."""
        if isinstance(after_sequence, bool) or not isinstance(after_sequence, int):
            raise TypeError("after_sequence is an int")
        if after_sequence < -1:
            raise ValueError("after_sequence is 0 (from the start) or a sequence seen")
        after_sequence = max(after_sequence, 0)  # -1 reads from the start too
        await self._stores.conversations.get_user_turn(account_id, turn_id)  # NotFound
        async for event in self._followers.follow(
            account_id, turn_id, after_sequence, follow=follow
        ):
            yield event

    def stream_followers(self, account_id: str, turn_id: str) -> int:
        """How many readers follow the turn's stream in this process now (at most
        `RuntimeConfig.stream_followers_per_turn`)."""
        return self._followers.reading(account_id, turn_id)

    async def prune_streams(self, *, limit: int = 1_000) -> int:
        """Delete the stream logs of turns finished longer ago than
        `RuntimeConfig.stream_retention_ms`; returns how many turns' logs went (at most
        `limit`). Workers call it with each recovery sweep."""
        cutoff = self._clock() - self._config.stream_retention_ms
        if cutoff <= 0:
            return 0
        async with self._stores.transaction() as tx:
            return await tx.conversations.prune_stream_events(cutoff, limit)

    async def recover_unfinished(
        self,
        *,
        limit: int = 1_000,
        older_than_ms: int | None = None,
        account_id: str | None = None,
        turn_id: str | None = None,
    ) -> RecoveryReport:
        """Finish every turn a crash interrupted (DESIGN §9): call it when a process starts, and
        from time to time for turns older than a lease (`older_than_ms`: leave turns whose
        marker moved more recently alone). Each turn is finished under its conversation's lock,
        so a turn still running is never touched. A turn that cannot be finished now (a store
        or executor failure) is listed in `failed` and tried again by the next sweep. With
        `account_id` and `turn_id`, only that turn (as `recover_turn`, reported the same way)."""
        if turn_id is not None:
            if account_id is None:
                raise ValueError("recovering one turn takes its account_id too")
            return RecoveryReport((await self.recover_turn(account_id, turn_id),))
        markers = await self._stores.conversations.list_unfinished_turns(limit)
        cutoff = None if older_than_ms is None else self._clock() - older_than_ms
        turns: dict[tuple[str, str], RecoveredTurn] = {}
        failed: list[tuple[str, str, str]] = []
        for marker in markers:
            key = (marker.account_id, marker.turn_id)
            if key in turns or (cutoff is not None and marker.updated_at > cutoff):
                continue  # (a turn another one finished first is reported as it ended)
            try:
                recovered = await self.recover_turn(marker.account_id, marker.turn_id)
            except Exception as failure:  # this turn waits for the next sweep; the others go on
                failed.append((marker.account_id, marker.turn_id, codes.code_of(failure)))
                continue
            for turn in (*recovered.earlier, recovered):
                turns[(turn.account_id, turn.turn_id)] = turn
        return RecoveryReport(tuple(turns.values()), tuple(failed))

    async def recover_turn(self, account_id: str, turn_id: str) -> RecoveredTurn:
        """Finish one interrupted turn (see `recover_unfinished`); a finished turn is left as
        it is. `NotFound` for a turn this account does not have."""
        user = await self._stores.conversations.get_user_turn(account_id, turn_id)
        async with self._conversation(account_id, user.conversation_id):
            return await self._recovery().turn(account_id, turn_id)

    def _ran(self, account_id: str, turn_id: str, task: asyncio.Task[AssistantTurn]) -> None:
        """A streamed turn's task ended: it is let go, its reader wakes at once whatever the log
        says, and its failure counts as read (its reader raises it, or the log holds it)."""
        self._running.discard(task)
        self._hub.notify(account_id, turn_id)
        if not task.cancelled():
            task.exception()

    @staticmethod
    def _judged(turn_input: TurnInput) -> TurnInput:
        if not isinstance(turn_input, TurnInput):  # e.g. a dict or JSON: the caller validates
            raise InvalidTurnInput("a turn is given as a TurnInput")
        # Judged again (a few microseconds): one built with model_construct or changed with
        # model_copy(update=...) skipped its rules.
        turn_input = TurnInput.model_validate(turn_input.model_dump(warnings=False))
        if turn_input.is_server_turn:
            raise InvalidTurnInput("a user's turn cannot carry a server turn's origin")
        return turn_input

    def _recovery(self) -> Recovery:
        return Recovery(
            stores=self._stores,
            workflows=self._workflows,
            directory=self._directory,
            executor=self._executor,
            copy=self._copy,
            config=self._config,
            clock=self._clock,
            follow_up_codes=self._follow_up_codes,
            receipt_claims=self._receipt_claims,
            hub=self._hub,
        )

    @contextlib.asynccontextmanager
    async def _conversation(self, account_id: str, conversation_id: str) -> AsyncIterator[None]:
        """One turn at a time per conversation; `ConversationBusy` past the configured wait."""
        wait = self._config.conversation_wait_ms / 1000
        try:
            async with self._stores.conversation_lock(account_id, conversation_id, wait):
                yield
        except Busy:  # only taking the lock raises it
            raise ConversationBusy("another turn of this conversation is still running") from None

    async def _handle(
        self,
        turn_input: TurnInput,
        turn_id: str | None = None,
        mode: StreamMode = StreamMode.WHOLE,
        on_accepted: asyncio.Event | None = None,
    ) -> AssistantTurn:
        """One turn, in a span of its own (`turnframe.turn`) with its stages as children."""
        if not observe.ENABLED:
            return await self._handle_turn(turn_input, turn_id, mode, on_accepted)
        started = time.perf_counter()
        with observe.span("turn", mode=mode.value, click=turn_input.is_click_only):
            observe.count("turn.received")
            try:
                turn = await self._handle_turn(turn_input, turn_id, mode, on_accepted)
            except TurnframeError as error:  # refused, busy, or failed: said by its code
                observe.count("turn.raised", code=error.code)
                if error.code == codes.WORKFLOW_INVARIANT_VIOLATION:
                    observe.count("workflow.invariant_violation")
                raise
            observe.count("turn.completed", status=turn.status.value)
            observe.annotate(
                turn_id=turn.turn_id, replay_token=turn.replay_token, status=turn.status.value
            )
            observe.record_ms("turn.duration_ms", (time.perf_counter() - started) * 1000)
            return turn

    async def _handle_turn(
        self,
        turn_input: TurnInput,
        turn_id: str | None,
        mode: StreamMode,
        on_accepted: asyncio.Event | None,
    ) -> AssistantTurn:
        streamed = on_accepted is not None
        with observe.stage("D-F", "load"):
            t = await self._loaded(turn_input, turn_id, mode, streamed)
        if observe.ENABLED:
            workflows = {case.case_ref.workflow for case in t.cases.cases.values()}
            only = next(iter(workflows)) if len(workflows) == 1 else None
            observe.annotate(turn_id=t.ctx.turn_id, workflow=only)
        try:
            with observe.stage("A-C", "accept"):
                accepted = await self._accept(t, turn_input)  # A/B, C (J-L for a click-only turn)
        except TurnInProgress:
            # The same request was accepted before and has no reply; no turn of this
            # conversation runs beside this one (its lock), so that one was interrupted:
            # finish it now and answer with what it became.
            await self._recovery().turn(t.ctx.account_id, t.ctx.turn_id)
            accepted = await self._accept(t, turn_input)
        except PreviousTurnUnfinished as previous:
            # A crash left the previous turn unfinished: finish it first (this turn holds the
            # conversation's lock), so this turn's record chains to a record that stays, then
            # read the cases again (finishing it may have changed them). If it cannot be
            # finished now, this turn is refused with that failure, having written nothing.
            await self._recovery().turn(t.ctx.account_id, previous.turn_id)
            t = await self._loaded(turn_input, t.ctx.turn_id, mode, streamed)
            try:
                accepted = await self._accept(t, turn_input)
            except PreviousTurnUnfinished:
                raise ConversationBusy(
                    "the conversation's previous turn is unfinished and could not be finished"
                ) from None
        if on_accepted is not None:
            on_accepted.set()
        if isinstance(accepted, AssistantTurn):
            return accepted  # a turn id seen before: its stored reply
        started = accepted.started or await self._understand_and_start(t, accepted)  # G-L
        return await self._commit_and_deliver(t, accepted.answer, started)  # M-V

    # --- the durable points ----------------------------------------------------------------------

    async def _loaded(
        self,
        turn_input: TurnInput,
        turn_id: str | None = None,
        mode: StreamMode = StreamMode.WHOLE,
        streamed: bool = False,
    ) -> _Turn:
        """The turn begun, with the cases it reads (D/E/F): a click needs only its card's."""
        t = self._begin(turn_input, turn_id, mode, streamed=streamed)
        if not turn_input.is_click_only:
            await t.cases.load_candidates(t.ctx.conversation_id)
        return t

    async def _accept(self, t: _Turn, turn_input: TurnInput) -> AssistantTurn | _Accepted:
        """Durable point 1: the card answer judged before any write, then the user turn. A
        click-only turn starts in the same transaction."""
        try:
            async with t.events.transaction(self._stores) as tx:
                if turn_input.turn_id is not None:
                    prior = await prior_reply(tx, t.ctx.account_id, turn_input.turn_id, turn_input)
                    if prior is not None:
                        return prior
                answer = await admit_card_answer(tx, t.cases, t.ctx)  # C
                user_turn, t.recorder.record = await accept_turn(tx, t.ctx, t.cases.cases.values())
                accepted = _Accepted(answer)
                if turn_input.is_click_only:  # J-L and M's journal, with the user turn
                    planned = self._plan(t, accepted.admitted, Understanding())
                    return _Accepted(answer, await self._start(tx, t, planned, user_turn))
                await tx.commits.commit(t.recorder.accepted(user_turn, "understand"))  # A/B
                return accepted
        except Conflict:
            # A request with the same turn id may have raced this one past the prior-reply check.
            if turn_input.turn_id is not None:
                prior = await prior_reply(
                    self._stores, t.ctx.account_id, turn_input.turn_id, turn_input
                )
                if prior is not None:
                    return prior
            raise

    async def _understand_and_start(self, t: _Turn, accepted: _Accepted) -> _Started:
        """G, J/K, then durable point 2 (L and M's journal). A turn that fails before any effect
        ends `failed`; a start whose COMMIT may have landed is left for recovery."""
        starting = False
        try:
            admitted = accepted.admitted
            with observe.stage("G", "understand"):
                understanding = await understand(
                    self._interpreter,
                    t.ctx,
                    t.cases.handles,
                    admitted.card if admitted else None,
                    self._clock,
                    t.notes,
                    t.audit,
                )  # G
            with observe.stage("J-K", "reduce"):
                planned = self._plan(t, admitted, understanding)  # J/K
            if not planned.writes_anything:
                return _Started(planned)
            starting = True
            with observe.stage("L", "start"):
                async with t.events.transaction(self._stores) as tx:
                    return await self._start(tx, t, planned)
        except BaseException as failure:
            if not (starting and isinstance(failure, Timeout)):
                await self._fail_before_effects(t, failure)
            raise

    async def _commit_and_deliver(
        self, t: _Turn, answer: CardAnswer | None, started: _Started
    ) -> AssistantTurn:
        """M, then durable point 3 (N, P) and, without a narrator, the delivery (Q-V) in the same
        transaction; with one, composing calls a model, so the reply is stored after the commit.
        The commit stands whatever fails after it."""
        fold = self._narrator is None
        follow_up = self._follow_up(t, started, answer)
        after_commit: BaseException | None = None
        assistant: AssistantTurn | None = None
        try:
            with observe.stage("M", "execute"):
                await t.execution.run(started.commands)  # M
            answered = self._answered_before(started, answer)
            with observe.stage("O", "re-project"):
                refreshed = await follow_up.refresh(self._answered_late(started, answer))  # O
            with observe.stage("N-P", "commit"):
                async with t.events.transaction(self._stores) as tx:
                    readback = await t.execution.commit(tx, started.claimed, record=not fold)  # N
                    mark = t.events.mark()  # the reply's events go back with its savepoint
                    try:
                        result = await self._raise_cards(
                            tx, t, started, answer, answered, follow_up, refreshed, readback
                        )
                        if fold:
                            async with tx.savepoint():
                                assistant = await self._composer(t).compose(result)
                                await t.recorder.deliver(tx, assistant, settled=t.audit.settled)
                    except BaseException as failure:
                        after_commit = failure
                        if fold:  # the record still says what committed
                            t.events.undo_to(mark)
                            await t.recorder.committed(tx)
        except BaseException as failure:
            if not (started.effects_possible or t.execution.started):
                await self._fail_before_effects(t, failure)
            raise
        if after_commit is not None:
            raise after_commit
        if assistant is None:
            try:
                with observe.stage("Q-T", "compose"):
                    assistant = await self._composer(t).compose(result)  # Q-T
            except (StoreError, ClaimGuardViolation):
                raise
            except Exception as failure:  # a model port misbehaved past what narration contains
                now = self._clock()
                t.audit.attempt(Purpose.NARRATE, self._narrator, now, now, failure)
                composer = self._composer(t, narrate=False)  # the reply from server copy
                assistant = await composer.compose(result)
            with observe.stage("U-V", "deliver"):
                async with t.events.transaction(self._stores) as tx:  # durable point 4: U/V
                    await t.recorder.deliver(tx, assistant, settled=t.audit.settled)
        return assistant

    # --- the steps between the durable points ----------------------------------------------------

    def _begin(
        self,
        turn_input: TurnInput,
        turn_id: str | None,
        mode: StreamMode,
        *,
        streamed: bool = False,
    ) -> _Turn:
        turn_id = turn_id or turn_input.turn_id or self._ids.new_id("turn")
        ctx = TurnContext(turn_input, turn_id, self._clock())
        audit = AuditTrail()
        copy = RecordingCopy(self._copy, audit.rendered)
        notes = Notes(copy, ctx.locale)
        events = TurnEvents(
            ctx.account_id,
            turn_id,
            self._clock,
            mode=mode,
            hub=self._hub,
            fresh=True,
            logged=streamed or self._config.stream_every_turn,
        )
        recorder = Recorder(audit, self._clock, events)
        return _Turn(
            ctx=ctx,
            cases=CaseBook(self._directory, self._workflows, ctx.account_id),
            notes=notes,
            audit=audit,
            copy=copy,
            factory=CardFactory(ctx, copy, self._config.max_selection_candidates),
            recorder=recorder,
            execution=Execution(self._executor, self._config, ctx, notes, audit, recorder),
        )

    def _plan(self, t: _Turn, admitted: Admitted | None, understanding: Understanding) -> _Planned:
        """K for the card answer (its act goes before the message's acts), then J/K: the whole
        message reduced to one plan, and the cards its acts wait for."""
        card_plan = None
        if admitted is not None:
            card_plan = plan_card_answer(
                admitted, t.cases, understanding, t.ctx, t.factory, t.notes
            )
        card_case_ref = admitted.card.case_ref if admitted else None
        plan = reduce_turn(
            account_id=t.ctx.account_id,
            turn_id=t.ctx.turn_id,
            understanding=understanding,
            handles=t.cases.handles,
            card_case=t.cases.get(card_case_ref.key) if card_case_ref else None,
            cards=t.factory,
        )
        t.audit.plan = plan
        t.audit.target_resolutions.extend(
            target_resolutions(understanding, t.cases.handles, card_case_ref)
        )
        t.notes.report(plan)
        raised = [
            RaisedCard(act_id, waiting.card, waiting.commands, deferrable=True)
            for act_id, waiting in plan.awaiting.items()
        ]
        acts = {act.act_id: act for act in understanding.acts}
        raised.extend(
            RaisedCard(
                act_id, t.factory.selection(acts[act_id], options, understanding.constraints)
            )
            for act_id, options in plan.selections.items()
        )
        return _Planned(understanding, card_plan, plan, raised)

    async def _start(
        self,
        stores: Stores,
        t: _Turn,
        planned: _Planned,
        user_turn: UserTurnRecord | None = None,
    ) -> _Started:
        """L, then M's journal: claim the answered card (exactly one answer wins it), persist the
        cards the turn raises before anything runs, and journal every command."""
        claim = None
        if planned.card_plan is not None:
            claim = await claim_card(stores, planned.card_plan, self._workflows, t.notes, t.audit)
        claimed = claim if isinstance(claim, ClaimedCard) else None
        if claimed is not None and claimed.resolves:  # recovery knows which turn won the card
            t.audit.claimed_interaction = claimed.card.interaction_id
        plan = planned.plan
        # A confirmation on a case this turn also changes is raised after the commit, against
        # the revision it leaves (else the commit would invalidate it at once).
        changing: set[CaseKey] = {
            c.envelope.case_ref.key for c in (*(claimed.commands if claimed else ()), *plan.ready)
        }
        shown: list[Interaction] = []
        deferred: list[RaisedCard] = []
        for card in (*(claimed.cards if claimed else ()), *planned.raised):
            if card.deferrable and card.card.case_ref.key in changing:
                deferred.append(card)
            elif await persist_card(stores, t.ctx, card.card, card.commands, t.notes, t.audit):
                shown.append(card.card)
        commands = await t.execution.admit(stores, claimed, plan.ready, user_turn)
        return _Started(planned, claim, shown, deferred, commands)

    @staticmethod
    def _answered_before(started: _Started, answer: CardAnswer | None) -> Interaction | None:
        """The card this turn answered after another answer had won it."""
        if isinstance(answer, AnsweredBefore):
            return answer.card
        if isinstance(started.claim, AnsweredBefore):
            return started.claim.card
        return None

    @staticmethod
    def _answered_late(started: _Started, answer: CardAnswer | None) -> list[Interaction]:
        """Cards the user answered after they closed: their cases are shown as they are now."""
        late = [answer.card] if isinstance(answer, AnsweredBefore | Closed) else []
        if isinstance(started.claim, AnsweredBefore):
            late.append(started.claim.card)
        return late

    def _follow_up(self, t: _Turn, started: _Started, answer: CardAnswer | None) -> FollowUp:
        touched = {c.case_ref.key for c in started.shown}
        touched |= {c.envelope.case_ref.key for c in started.commands}
        if isinstance(answer, Admitted):
            touched.add(answer.card.case_ref.key)
        return FollowUp(t.ctx, t.cases, t.factory, t.notes, t.audit, list(started.shown), touched)

    async def _raise_cards(
        self,
        stores: Stores,
        t: _Turn,
        started: _Started,
        answer: CardAnswer | None,
        answered_before: Interaction | None,
        follow_up: FollowUp,
        refreshed: Sequence[CaseInView],
        readback: Mapping[str, DomainEvent],
    ) -> TurnResult:
        """P inside the commit's transaction, behind a savepoint: a failure here undoes only its
        own writes, never the commit."""
        planned = started.planned
        answered_events: Sequence[DomainEvent] = ()
        async with stores.savepoint():
            await follow_up.raise_cards(stores, planned.understanding, started.deferred, refreshed)
            if answered_before is not None and answered_before.resolution_event_ids:
                answered_events = await stores.events.get_by_ids(
                    t.ctx.account_id, list(answered_before.resolution_event_ids)
                )
        return TurnResult(
            understanding=planned.understanding,
            plan=planned.plan,
            cases=t.cases,
            readback=readback,
            shown=follow_up.shown,
            touched=frozenset(follow_up.touched),
            answered_before=answered_before,
            answered_events=answered_events,
            closed=answer if isinstance(answer, Closed) else None,
        )

    def _composer(self, t: _Turn, *, narrate: bool = True) -> Composer:
        narration = None
        if self._narrator is not None and self._reviewer is not None and narrate:
            narration = Narration(self._narrator, self._reviewer, t.ctx, self._clock, t.audit)
        return Composer(
            t.ctx,
            self._workflows,
            t.copy,
            self._clock,
            narration,
            t.notes,
            t.audit,
            follow_up_codes=self._follow_up_codes,
            receipt_claims=self._receipt_claims,
        )

    async def _fail_before_effects(self, t: _Turn, failure: BaseException) -> None:
        """A turn that failed before any command could run ends `failed`; one that may have
        effects is left at its phase for recovery to finish by idempotency key."""
        turn = t.ctx
        code = codes.code_of(failure, codes.RUNTIME_TURN_FAILED)
        try:
            async with t.events.transaction(self._stores) as tx:
                if await tx.journal.unsettled_for_turn(turn.account_id, turn.turn_id):
                    return
                record = t.recorder.at(TurnPhase.FAILED, failure_code=code)
                await tx.replay.put(record)
                await tx.conversations.set_phase(turn.account_id, turn.turn_id, TurnPhase.FAILED)
                t.events.failed(code)
                await t.events.append(tx)
            observe.turn_failed(turn.turn_id, record.replay_token, code)
        except StoreError:
            pass  # the marker stays unfinished: recovery restarts interpretation


@dataclass(frozen=True)
class _Turn:
    """One turn's context and the collaborators its steps share; what each step decides is
    returned by that step."""

    ctx: TurnContext
    cases: CaseBook
    notes: Notes
    audit: AuditTrail
    copy: ServerCopy
    factory: CardFactory
    recorder: Recorder
    execution: Execution

    @property
    def events(self) -> TurnEvents:
        return self.recorder.events


@dataclass(frozen=True)
class _Accepted:
    """Durable point 1's result: the card answer as judged and, for a click-only turn, the
    start made in the same transaction."""

    answer: CardAnswer | None
    started: _Started | None = None

    @property
    def admitted(self) -> Admitted | None:
        return self.answer if isinstance(self.answer, Admitted) else None


@dataclass(frozen=True)
class _Planned:
    """J/K's result: the understanding, what the card answer does, the plan, the cards raised."""

    understanding: Understanding
    card_plan: CardPlan | None
    plan: Plan
    raised: list[RaisedCard]

    @property
    def writes_anything(self) -> bool:
        """Whether starting the turn has anything to write (a card to claim or raise, a command
        to journal)."""
        return self.card_plan is not None or bool(self.plan.ready) or bool(self.raised)


@dataclass(frozen=True)
class _Started:
    """L's result: the claim, the cards shown, the confirmations deferred past the commit, and
    the commands journaled to run (the card's first)."""

    planned: _Planned
    claim: ClaimedCard | AnsweredBefore | None = None
    shown: list[Interaction] = field(default_factory=list)
    deferred: list[RaisedCard] = field(default_factory=list)
    commands: list[PlannedCommand] = field(default_factory=list)

    @property
    def claimed(self) -> ClaimedCard | None:
        return self.claim if isinstance(self.claim, ClaimedCard) else None

    @property
    def effects_possible(self) -> bool:
        """A card moved to `resolving`, or a command journaled: recovery finishes this turn."""
        claimed = self.claimed
        return bool(self.commands) or (claimed is not None and claimed.resolves)
