"""`TurnRuntime`: the public facade. One user turn in, one persisted `AssistantTurn` out.

What every part shares lives in the kernel (`kernel.Kernel`); the turn itself runs in
`pipeline` through the durable points of `durable`; recovery in `recover`; the outbox in
`outbox`. This module holds the constructor, the public methods, and what a streamed turn's task
needs while it outlives its reader.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import secrets
import socket
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from functools import partial
from typing import Any

from turnframe_core.erasure import ErasureReport, TurnErasure
from turnframe_core.ids import IdSource
from turnframe_core.replay import ReplayRecord
from turnframe_core.server_events import ServerEvent
from turnframe_core.stream import StreamEvent, StreamMode
from turnframe_core.stream import TurnFailed as TurnFailedEvent
from turnframe_core.turn import AssistantTurn, TurnInput
from turnframe_core.workflow import Workflow, WorkflowDefinition
from turnframe_runtime.audit import Audit, audit_turn
from turnframe_runtime.config import OutboxConfig, RuntimeConfig
from turnframe_runtime.copy import CopyDrift, ServerCopy, drift
from turnframe_runtime.erasure import erase_expired, erase_subject, export_subject
from turnframe_runtime.errors import TurnFailed, TurnInProgress, UnknownWorkflow
from turnframe_runtime.feed import FeedItem
from turnframe_runtime.kernel import Kernel
from turnframe_runtime.origins import EventOrigin
from turnframe_runtime.outbox.dispatch import OutboxDispatcher
from turnframe_runtime.outbox.ports import OutboxSender
from turnframe_runtime.pipeline import judged, run_turn
from turnframe_runtime.ports import (
    CaseDirectory,
    ClaimReviewer,
    Executor,
    Interpreter,
    Narrator,
    WorkflowExecutor,
    as_executor,
)
from turnframe_runtime.recover import RecoveredTurn, RecoveryReport
from turnframe_runtime.server_event import judged_event, run_server_event, verified_origin
from turnframe_runtime.timers import cancel, fire_due, schedule
from turnframe_store.bundle import Stores
from turnframe_store.errors import NotFound

__all__ = ["TurnInProgress", "TurnRuntime", "UnknownWorkflow"]


class TurnRuntime:
    """Runs conversational turns safely. Build one per process and share it; its collaborators
    are fixed at construction."""

    def __init__(
        self,
        *,
        stores: Stores,
        workflows: Sequence[Workflow | WorkflowDefinition],
        directory: CaseDirectory,
        executor: Executor | WorkflowExecutor,
        interpreter: Interpreter | None = None,
        narrator: Narrator | None = None,
        reviewer: ClaimReviewer | None = None,
        copy: ServerCopy | None = None,
        config: RuntimeConfig | None = None,
        clock: Callable[[], int] | None = None,
        ids: IdSource | None = None,
        senders: Mapping[str, OutboxSender] | None = None,
        outbox: OutboxConfig | None = None,
        origins: Sequence[EventOrigin] = (),
    ) -> None:
        self._kernel = Kernel.build(
            stores=stores,
            workflows=workflows,
            directory=directory,
            executor=executor,
            interpreter=interpreter,
            narrator=narrator,
            reviewer=reviewer,
            copy=copy,
            config=config,
            clock=clock,
            ids=ids,
            origins=origins,
        )
        self._outbox = OutboxDispatcher(self._kernel, senders or {}, outbox)
        self._running: set[asyncio.Task[AssistantTurn]] = set()
        #: who this runtime's timer claims name (one per runtime: a restart is a new worker)
        self._timer_worker = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(6)}"

    @property
    def stores(self) -> Stores:
        return self._kernel.stores

    @property
    def workflows(self) -> Mapping[str, Workflow]:
        return self._kernel.workflows

    @property
    def directory(self) -> CaseDirectory:
        return self._kernel.directory

    @property
    def executor(self) -> Executor:
        return self._kernel.executor

    @property
    def outbox(self) -> OutboxDispatcher:
        """Carries out this runtime's outbox rows with its `senders` (the dispatch and reconcile
        actors call it; `turnframe worker` runs them with a relay)."""
        return self._outbox

    @property
    def config(self) -> RuntimeConfig:
        return self._kernel.config

    @property
    def origins(self) -> Mapping[str, EventOrigin]:
        """The senders of server events this runtime knows, by name (read-only)."""
        return self._kernel.origins

    # --- public API -----------------------------------------------------------------------------

    async def load_turn(self, account_id: str, turn_id: str) -> AssistantTurn:
        """The stored assistant turn, exactly as it was returned."""
        return await self._kernel.stores.conversations.get_assistant_turn(account_id, turn_id)

    async def load_conversation(
        self, account_id: str, conversation_id: str, limit: int = 20
    ) -> tuple[AssistantTurn, ...]:
        """The conversation's last `limit` assistant turns, oldest first, exactly as returned."""
        return await self._kernel.stores.conversations.recent_turns(
            account_id, conversation_id, limit
        )

    async def replay(self, account_id: str, replay_token: str) -> ReplayRecord:
        """The turn's audit record (read-only: executes nothing, calls no model)."""
        return await self._kernel.stores.replay.get_by_token(account_id, replay_token)

    async def audit(self, account_id: str, replay_token: str) -> Audit:
        """The turn's audit (DESIGN §11): the ten audit questions answered from stored data, and
        every digest verified (its record against its chain link, the conversation's chain, the
        understanding and plan hashes, the reply against its record). Read-only: it executes
        nothing, calls no model and writes nothing."""
        return await audit_turn(self._kernel.stores, account_id, replay_token)

    async def rerender(self, account_id: str, replay_token: str) -> list[CopyDrift]:
        """Drift of a turn's server copy: each sentence it rendered, rendered again from the same
        template and parameters in the same locale with today's copy, reported where the text,
        the template or the catalog differs. Read-only; replay itself never re-renders."""
        record = await self._kernel.stores.replay.get_by_token(account_id, replay_token)
        return drift(self._kernel.copy, record.copy_renders)

    async def handle_turn(self, turn_input: TurnInput) -> AssistantTurn:
        """Run one turn end to end and return the AssistantTurn it persisted.

        A turn commits at its durable points (decision 0006): accept; start (the card claimed,
        pre-execution cards, every command journaled); commit (the bundle, the events read back,
        follow-up cards); deliver. A click-only turn makes no model call, so it accepts and
        starts in one transaction; without a narrator the reply is delivered with the commit.
        A `turn_id` of the form the server derives for its own turns (`is_derived_id`: outbox
        follow-ups, event turns) is refused with `InvalidTurnInput` before anything is read, so
        a user's turn can never take the place of a turn the server will write.
        """
        turn_input = judged(turn_input)
        async with self._kernel.lock(turn_input.account_id, turn_input.conversation_id):
            return await run_turn(self._kernel, turn_input)

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
        turn_input = judged(turn_input)
        mode = StreamMode(mode)
        turn_id = turn_input.turn_id or self._kernel.ids.new_id("turn")
        account_id = turn_input.account_id

        accepted = asyncio.Event()

        async def run() -> AssistantTurn:
            async with self._kernel.lock(account_id, turn_input.conversation_id):
                return await run_turn(self._kernel, turn_input, turn_id, mode, accepted)

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
                tail = await self._kernel.stores.conversations.stream_tail(account_id, turn_id)
                if not isinstance(tail, TurnFailedEvent):
                    raise
                async for event in self._kernel.followers.follow(
                    account_id, turn_id, 0, follow=False
                ):
                    yield event
                return
        async for event in self._kernel.followers.follow(account_id, turn_id, 0, task):
            yield event

    async def server_event(
        self, event: ServerEvent, *, signature: str | None = None
    ) -> AssistantTurn:
        """Tell the event's conversation of an event from outside, as a server turn that runs
        the workflow's own command for it (docs/server-events.md): the origin verified
        (`OriginNotVerified`), the operation compiled on the case by its workflow (`NotFound`
        for a conversation, workflow or case the account does not have; `ServerEventRefused`
        when the domain refuses it) and judged by its policy with the origin's authority (a
        policy only a user's click satisfies shows the confirmation card instead), journaled,
        executed and committed with a receipt turn in the conversation's locale, without a
        model call. The same event again returns the same turn, with no second effect; its
        key with another event is `IdempotencyKeyReused`; sent again while its turn is
        unfinished and younger than `RuntimeConfig.timer_lease_ms` (another process may be
        running it), `TurnInProgress`. Every refusal writes nothing."""
        event = judged_event(event)
        origin = verified_origin(self._kernel, event, signature)
        return await run_server_event(self._kernel, event, origin)

    async def schedule_event(
        self, event: ServerEvent, *, at_ms: int, signature: str | None = None
    ) -> str:
        """Store `event` with its conversation to run as `server_event` at `at_ms` (epoch
        milliseconds), and return its timer id. It is verified now as `server_event` verifies
        it (`OriginNotVerified`; `NotFound` for a conversation, workflow or case the account
        does not have); the id is derived from (account, origin, idempotency key), so
        scheduling it again is the same timer, and the key with another event or time is
        `IdempotencyKeyReused`. `fire_due_events` runs it (`turnframe worker` calls it)."""
        event = judged_event(event)
        return await schedule(self._kernel, event, at_ms, signature)

    async def cancel_event(self, account_id: str, timer_id: str) -> bool:
        """Cancel a scheduled event that has not fired: True when it is cancelled, False when
        it had fired already; `NotFound` for a timer this account does not have. A timer a
        worker holds at that moment may still run."""
        return await cancel(self._kernel, account_id, timer_id)

    async def fire_due_events(self, *, limit: int = 100) -> int:
        """Run the scheduled events that are due (every account; at most `limit`), each claimed
        with a lease (`RuntimeConfig.timer_lease_ms`) so two workers never run one at once, as
        a server event; returns how many were marked fired. A timer whose worker died is
        claimed again after the lease and meets the turn the first claim began (one receipt
        turn, one effect); an event refused for good is marked fired and counted
        (`timer.refused`), having written nothing."""
        return await fire_due(self._kernel, self._timer_worker, limit)

    async def resume_stream(
        self,
        account_id: str,
        turn_id: str,
        after_sequence: int = 0,
        *,
        follow: bool = True,
        admitted: asyncio.Event | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """The turn's stream events after `after_sequence` (0: from the start), exactly as they
        were published, in order; from any process sharing the stores. With `follow`, waits for
        the events of a turn still running (or being recovered) until its `turn.completed` or
        `turn.failed`; without, yields what is logged now. `NotFound` for a turn this account
        does not have; `StreamExpired` for a finished turn whose log was pruned
        (`RuntimeConfig.stream_retention_ms`); `TooManyFollowers` past
        `RuntimeConfig.stream_followers_per_turn` readers in this process. `admitted`, when
        given, is set once none of these applies and the reader waits for the log to grow (a
        web layer answers then; a reader that has events gets them first)."""
        if isinstance(after_sequence, bool) or not isinstance(after_sequence, int):
            raise TypeError("after_sequence is an int")
        if after_sequence < -1:
            raise ValueError("after_sequence is 0 (from the start) or a sequence seen")
        after_sequence = max(after_sequence, 0)  # -1 reads from the start too
        await self._kernel.stores.conversations.get_user_turn(account_id, turn_id)  # NotFound
        async for event in self._kernel.followers.follow(
            account_id, turn_id, after_sequence, follow=follow, admitted=admitted
        ):
            yield event

    async def follow_conversation(
        self,
        account_id: str,
        conversation_id: str,
        after_sequence: int = 0,
        *,
        follow: bool = True,
        admitted: asyncio.Event | None = None,
    ) -> AsyncIterator[FeedItem]:
        """Every stored turn of the conversation after `after_sequence` (0: from the start), in
        commit order, each exactly as stored, turns without a reply skipped; from any process
        sharing the stores (`turnframe_runtime.feed`). With `follow` it never ends (the caller
        stops reading): a turn stored by this process arrives at once, one stored elsewhere
        within a poll interval; without, yields what is stored now. `TooManyFollowers` past
        `RuntimeConfig.feed_followers_per_conversation` readers in this process, before
        anything is read; `NotFound` for a conversation this account does not have. `admitted`,
        when given, is set once neither applies (the reader is counted and the conversation
        found): a web layer answers then, though a quiet conversation's first item may come much
        later."""
        if isinstance(after_sequence, bool) or not isinstance(after_sequence, int):
            raise TypeError("after_sequence is an int")
        if after_sequence < 0:
            raise ValueError("after_sequence is 0 (from the start) or a sequence seen")
        feeds = self._kernel.feeds
        with feeds.counted(account_id, conversation_id):
            await self._kernel.stores.conversations.get_conversation(account_id, conversation_id)
            if admitted is not None:
                admitted.set()
            # closed with this one, so a reader that stops leaves the shared poll at once
            async with contextlib.aclosing(
                feeds.follow(account_id, conversation_id, after_sequence - 1, follow=follow)
            ) as items:
                async for item in items:
                    yield item

    def feed_followers(self, account_id: str, conversation_id: str) -> int:
        """How many readers follow the conversation's feed in this process now (at most
        `RuntimeConfig.feed_followers_per_conversation`)."""
        return self._kernel.feeds.reading(account_id, conversation_id)

    async def follow_up_turns(self, account_id: str, turn_id: str) -> tuple[str, ...]:
        """The ids of the server-written turns that will answer this turn's outbox rows (the
        rows its record names, in order): each row's `answer` follow-up turn
        (`follow_up_turn_id(account, outbox_id, "answer")`), for the rows whose answer writes
        one (`OutboxDispatcher.answer_turn`: a row naming no conversation, or a completed
        answer its case records nothing of, writes none). The `unknown` turn a row may also
        get (verification in progress) does not answer it and is not listed. Empty when the
        turn enqueued nothing; `NotFound` for a turn this account does not have."""
        stores = self._kernel.stores
        await stores.conversations.get_user_turn(account_id, turn_id)  # NotFound
        try:
            record = await stores.replay.get(account_id, turn_id)
        except NotFound:
            return ()
        answers: list[str] = []
        for outbox_id in record.outbox_ids:
            try:
                row = await stores.outbox.get(outbox_id)
            except NotFound:
                continue
            if str(row.payload.get("account_id", "")) != account_id:
                continue
            answer = await self._outbox.answer_turn(row)
            if answer is not None:
                answers.append(answer)
        return tuple(answers)

    def stream_followers(self, account_id: str, turn_id: str) -> int:
        """How many readers follow the turn's stream in this process now (at most
        `RuntimeConfig.stream_followers_per_turn`)."""
        return self._kernel.followers.reading(account_id, turn_id)

    async def prune_streams(self, *, limit: int = 1_000) -> int:
        """Delete the stream logs of turns finished longer ago than
        `RuntimeConfig.stream_retention_ms`; returns how many turns' logs went (at most
        `limit`). Workers call it with each recovery sweep."""
        return await self._kernel.followers.prune(self._kernel.clock(), limit)

    async def erase(self, account_id: str, subject: str) -> ErasureReport:
        """Erase a subject's words and values (decision 0032): every turn of the conversation
        `subject` loses what its user wrote and what was rendered from it, in the user turn, the
        reply's blocks, the replay record, the stream log, the journal's arguments and the
        outbox's payloads; ids, order, kinds, statuses and every digest the audit chain needs
        stay, so the conversation's audit still verifies. Each turn is erased in one transaction,
        so a crash leaves whole turns; erasing again finishes (idempotent). What still has to
        run with its words (a turn running, a command or an outbox row not settled) is kept and
        named in the report. `UnknownSubject` for a conversation the account does not hold
        (another account's too), `InvalidSubject` for a malformed id: nothing is written."""
        return await erase_subject(
            self._kernel.stores, account_id, subject, at=self._kernel.clock()
        )

    async def erase_expired(self, *, limit: int = 1_000) -> tuple[TurnErasure, ...]:
        """The retention sweep (`RuntimeConfig.turn_retention_ms`): erase, as `erase` does, at
        most `limit` finished turns older than the retention whose words are not all erased
        yet, every account, oldest first; what each erasure did. A turn that still keeps words
        (a card open, a command not run) is taken again by a later sweep. `turnframe worker`
        runs it with each recovery sweep; nothing without a retention."""
        kernel = self._kernel
        return await erase_expired(
            kernel.stores, kernel.config.turn_retention_ms, now=kernel.clock(), limit=limit
        )

    async def export_subject(self, account_id: str, subject: str) -> dict[str, Any]:
        """A subject's data as JSON-ready data (the conversation `subject`: each turn's input,
        understanding, reply, commands and cards), read in one snapshot; errors as `erase`."""
        return await export_subject(
            self._kernel.stores, account_id, subject, at=self._kernel.clock()
        )

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
        return await self._kernel.recovery().sweep(limit=limit, older_than_ms=older_than_ms)

    async def recover_turn(self, account_id: str, turn_id: str) -> RecoveredTurn:
        """Finish one interrupted turn (see `recover_unfinished`); a finished turn is left as
        it is. `NotFound` for a turn this account does not have."""
        return await self._kernel.recovery().locked(account_id, turn_id)

    def _ran(self, account_id: str, turn_id: str, task: asyncio.Task[AssistantTurn]) -> None:
        """A streamed turn's task ended: it is let go, its reader wakes at once whatever the log
        says, and its failure counts as read (its reader raises it, or the log holds it)."""
        self._running.discard(task)
        self._kernel.hub.notify(account_id, turn_id)
        if not task.cancelled():
            task.exception()

    # --- test seams: a test swaps a port as a restarted process would ----------------------------

    @property
    def _executor(self) -> Executor:
        return self._kernel.executor

    @_executor.setter
    def _executor(self, executor: Executor | WorkflowExecutor) -> None:
        self._swap(executor=as_executor(executor))

    @property
    def _interpreter(self) -> Interpreter | None:
        return self._kernel.interpreter

    @_interpreter.setter
    def _interpreter(self, interpreter: Interpreter | None) -> None:
        self._swap(interpreter=interpreter)

    def _swap(self, **ports: object) -> None:
        self._kernel = dataclasses.replace(self._kernel, **ports)  # type: ignore[arg-type]
        self._outbox.kernel = self._kernel
