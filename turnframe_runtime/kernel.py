"""The kernel: the state every part of the runtime shares, in one frozen home.

Rules:
- What a turn, recovery and the outbox share (stores, workflows, directory, ports, copy, config,
  clock, ids, the stream hub, its followers, the conversation feeds, the event origins) is
  fixed when the kernel is built and never changes; the public facade (`TurnRuntime`), the
  outbox dispatcher, the worker and recovery all take the kernel, and none of them reaches into
  another's underscore names.
- A kernel refuses to be built over stores without transactions, duplicate workflow keys,
  nameable record kinds or event origin names, free narration without an explicitly passed
  reviewer, or copy missing a message a declared locale needs.
- One turn at a time per conversation (`lock`); each turn's state is its own (`begin`).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from turnframe_core.ids import IdSource, UlidIdSource
from turnframe_core.replay import PolicyDecisionRecord
from turnframe_core.stream import StreamMode
from turnframe_core.turn import TurnInput
from turnframe_core.wording import ClaimClass
from turnframe_core.workflow import Workflow, WorkflowDefinition, as_workflow
from turnframe_runtime.cards import CardFactory
from turnframe_runtime.cases import CaseBook
from turnframe_runtime.compose import Composer
from turnframe_runtime.config import RuntimeConfig
from turnframe_runtime.context import AuditTrail, Teller, TurnContext
from turnframe_runtime.copy import (
    MissingCopy,
    RecordingCopy,
    ServerCopy,
    library_copy,
    receipt_title,
)
from turnframe_runtime.errors import ConversationBusy, ReviewerRequired, StoresWithoutTransactions
from turnframe_runtime.execute import Execution
from turnframe_runtime.feed import ConversationFeeds
from turnframe_runtime.follow import Followers
from turnframe_runtime.lookup import CaseLookups
from turnframe_runtime.narration import Narration
from turnframe_runtime.origins import EventOrigin
from turnframe_runtime.ports import (
    CaseDirectory,
    ClaimReviewer,
    Executor,
    Interpreter,
    Narrator,
    WorkflowExecutor,
    as_executor,
)
from turnframe_runtime.record import Recorder
from turnframe_runtime.recover import Recovery
from turnframe_runtime.state import TurnState
from turnframe_runtime.stream import StreamHub, TurnEvents
from turnframe_store.bundle import Stores
from turnframe_store.errors import Busy

__all__ = ["Kernel"]


@dataclass(frozen=True)
class Kernel:
    """The runtime's shared state; build it with `Kernel.build`."""

    stores: Stores
    workflows: Mapping[str, Workflow]
    directory: CaseDirectory
    executor: Executor
    interpreter: Interpreter | None
    narrator: Narrator | None
    reviewer: ClaimReviewer | None
    copy: ServerCopy
    config: RuntimeConfig
    clock: Callable[[], int]
    ids: IdSource
    #: the receipt codes a workflow says a follow-up turn tells
    follow_up_codes: frozenset[str]
    #: what each receipt code backs, by claim class
    receipt_claims: Mapping[str, tuple[ClaimClass, ...]]
    #: wakes this process's readers of the streams its turns write
    hub: StreamHub
    followers: Followers
    #: this process's readers of conversations' feeds
    feeds: ConversationFeeds
    #: the senders of server events, by name
    origins: Mapping[str, EventOrigin]
    #: the records users may name, and this process's count of their lookups
    lookups: CaseLookups

    @classmethod
    def build(
        cls,
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
        origins: Sequence[EventOrigin] = (),
    ) -> Kernel:
        """The kernel, its collaborators judged (see the module's rules)."""
        adopted = [as_workflow(w) for w in workflows]
        by_key = {w.key: w for w in adopted}
        if len(by_key) != len(adopted):
            raise ValueError("workflow keys must be unique")
        by_name: dict[str, EventOrigin] = {}
        for origin in origins:
            if not isinstance(origin, EventOrigin):
                raise TypeError("an event origin is an EventOrigin (HmacOrigin, TrustedOrigin)")
            if origin.name in by_name:
                raise ValueError("event origin names must be unique")
            by_name[origin.name] = origin
        if not stores.transactional:
            raise StoresWithoutTransactions(
                "these stores cannot commit a turn's writes together; use MemoryStores, "
                "SqlStores or stores whose transaction() passes the conformance suite"
            )
        config = config or RuntimeConfig()
        if narrator is not None and config.narration == "free" and reviewer is None:
            raise ReviewerRequired(
                "free narration is reviewed by a separate ClaimReviewer; pass reviewer= (a "
                "narrator's own reviewer does not count)"
            )
        follow_up_codes = frozenset(
            code for workflow in adopted for code in workflow.follow_up_receipts()
        )
        receipt_claims: Mapping[str, tuple[ClaimClass, ...]] = MappingProxyType(
            {
                code: tuple(classes)
                for workflow in adopted
                for code, classes in workflow.receipt_claims().items()
            }
        )
        # A turn renders only in a locale the runtime declares (its fallback chain ends in the
        # default locale), and every declared locale is checked whole below.
        served: ServerCopy = (copy or library_copy()).serving(config.locales)
        clock = clock or (lambda: time.time_ns() // 1_000_000)
        required = [
            *(receipt_title(t) for workflow in adopted for t in workflow.receipt_templates()),
            *(template for workflow in adopted for template in workflow.copy_templates()),
        ]
        samples: dict[str, Sequence[Mapping[str, Any]]] = {}
        for workflow in adopted:
            samples.update(workflow.copy_samples())
        missing = served.missing(config.locales, required=required, samples=samples)
        if missing:
            raise MissingCopy(missing)
        hub = StreamHub()
        return cls(
            stores=stores,
            workflows=MappingProxyType(by_key),
            directory=directory,
            executor=as_executor(executor),
            interpreter=interpreter,
            narrator=narrator,
            reviewer=reviewer,
            copy=served,
            config=config,
            clock=clock,
            ids=ids or UlidIdSource(clock),
            follow_up_codes=follow_up_codes,
            receipt_claims=receipt_claims,
            hub=hub,
            followers=Followers(stores, hub, config),
            feeds=ConversationFeeds(stores, hub, config),
            origins=MappingProxyType(by_name),
            lookups=CaseLookups.build(
                adopted, config.lookups_per_conversation, config.lookup_window_ms
            ),
        )

    @asynccontextmanager
    async def lock(self, account_id: str, conversation_id: str) -> AsyncIterator[None]:
        """One turn at a time per conversation; `ConversationBusy` past the configured wait."""
        wait = self.config.conversation_wait_ms / 1000
        try:
            async with self.stores.conversation_lock(account_id, conversation_id, wait):
                yield
        except Busy:  # only taking the lock raises it
            raise ConversationBusy("another turn of this conversation is still running") from None

    def begin(
        self,
        turn_input: TurnInput,
        turn_id: str | None = None,
        mode: StreamMode = StreamMode.WHOLE,
        *,
        streamed: bool = False,
        decided: Sequence[PolicyDecisionRecord] = (),
    ) -> TurnState:
        """A new turn's state (its id, when not given, the input's or a fresh one); `decided`:
        policy decisions made before it began (a follow-up turn's, by the turn that ran them)."""
        turn_id = turn_id or turn_input.turn_id or self.ids.new_id("turn")
        ctx = TurnContext(turn_input, turn_id, self.clock())
        audit = AuditTrail(policy_decisions=list(decided))
        copy = RecordingCopy(self.copy, audit.rendered)
        tell = Teller(copy, ctx.locale)
        events = TurnEvents(
            ctx.account_id,
            turn_id,
            self.clock,
            mode=mode,
            hub=self.hub,
            fresh=True,
            logged=streamed or self.config.stream_every_turn,
        )
        recorder = Recorder(audit, self.clock, events)
        return TurnState(
            ctx=ctx,
            cases=CaseBook(self.directory, self.workflows, ctx.account_id),
            tell=tell,
            audit=audit,
            copy=copy,
            factory=CardFactory(ctx, copy, self.config.max_selection_candidates),
            recorder=recorder,
            execution=Execution(self.executor, self.config, ctx, tell, audit, recorder),
        )

    def composer(
        self, ctx: TurnContext, copy: ServerCopy, audit: AuditTrail, *, narrate: bool
    ) -> Composer:
        """Q-T for one turn: with `narrate` (and a narrator), its prose from the model;
        otherwise from server copy only."""
        narration = None
        if self.narrator is not None and narrate:
            reviewer = self.reviewer if self.config.narration == "free" else None
            narration = Narration(
                self.narrator, reviewer, ctx, self.clock, audit, self.copy, self.config.guard
            )
        return Composer(
            ctx,
            self.workflows,
            copy,
            self.clock,
            narration,
            audit,
            follow_up_codes=self.follow_up_codes,
            receipt_claims=self.receipt_claims,
            guard=self.config.guard,
        )

    def recovery(self) -> Recovery:
        """Recovery (DESIGN §9) with this kernel's collaborators."""
        return Recovery(self)
