"""The audit record (DESIGN §11) and steps U/V: persist the exact turn, then finish its record.

- The record at each durable point is one pure function (`replay_record`) of the record before
  it and a frozen snapshot of what the turn's stages returned so far (`TurnFacts`); recovery
  reads a stored record back into the same values (`TurnFacts.of`).
- The understanding and the plan are digested once, when the plan is final, and never change.
- The exact turn is stored before the final record, so a record never says `delivered` for a
  turn that is not stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from turnframe_core.canonical import digest
from turnframe_core.erasure import erased_block_digest, erased_event_digest
from turnframe_core.events import DomainEvent, event_digest
from turnframe_core.replay import (
    CommandOutcomeRecord,
    CopyRender,
    PolicyDecisionRecord,
    ProseFinding,
    ProviderAttempt,
    ReplayRecord,
    TargetResolutionRecord,
    TurnPhase,
)
from turnframe_core.stream import block_content_hash
from turnframe_core.turn import AssistantTurn
from turnframe_core.understanding import Problem
from turnframe_runtime import observe
from turnframe_runtime.context import AuditTrail
from turnframe_runtime.stream import TurnEvents
from turnframe_store.bundle import Stores
from turnframe_store.records import CommitBundle, UserTurnRecord

__all__ = ["Recorder", "TurnFacts", "replay_record"]


@dataclass(frozen=True)
class TurnFacts:
    """What a turn's record states, as its stages returned it (in their order)."""

    #: the understanding and the plan, digested once (absent until the plan is final)
    digested: Mapping[str, Any] = field(default_factory=dict)
    understanding_problems: tuple[Problem, ...] = ()
    target_resolutions: tuple[TargetResolutionRecord, ...] = ()
    policy_decisions: tuple[PolicyDecisionRecord, ...] = ()
    command_outcomes: tuple[CommandOutcomeRecord, ...] = ()
    interactions_created: tuple[str, ...] = ()
    interaction_digests: tuple[str, ...] = ()
    erased_interaction_digests: tuple[str, ...] = ()
    event_ids: tuple[str, ...] = ()
    event_digests: tuple[str, ...] = ()
    erased_event_digests: tuple[str, ...] = ()
    outbox_ids: tuple[str, ...] = ()
    provider_attempts: tuple[ProviderAttempt, ...] = ()
    claim_violations: tuple[str, ...] = ()
    prose_findings: tuple[ProseFinding, ...] = ()
    claimed_interaction: str | None = None
    copy_renders: tuple[CopyRender, ...] = ()

    @classmethod
    def of(cls, record: ReplayRecord) -> TurnFacts:
        """The facts a stored record states (recovery carries on from them)."""
        return cls(
            digested=_digested(record),
            understanding_problems=tuple(record.understanding_problems),
            target_resolutions=tuple(record.target_resolutions),
            policy_decisions=tuple(record.policy_decisions),
            command_outcomes=tuple(record.command_outcomes),
            interactions_created=tuple(record.interactions_created),
            interaction_digests=tuple(record.interaction_digests),
            erased_interaction_digests=tuple(record.erased_interaction_digests),
            event_ids=tuple(record.event_ids),
            event_digests=tuple(record.event_digests),
            erased_event_digests=tuple(record.erased_event_digests),
            outbox_ids=tuple(record.outbox_ids),
            provider_attempts=tuple(record.provider_attempts),
            claim_violations=tuple(record.claim_violations),
            prose_findings=tuple(record.prose_findings),
            claimed_interaction=record.claimed_interaction,
            copy_renders=tuple(record.copy_renders),
        )


def replay_record(
    before: ReplayRecord, phase: TurnPhase, at: int, facts: TurnFacts, **extra: Any
) -> ReplayRecord:
    """The turn's record at `phase` (built, not stored): `before` advanced to state `facts`."""
    return before.advanced(
        phase,
        at=at,
        **facts.digested,
        understanding_problems=facts.understanding_problems,
        target_resolutions=facts.target_resolutions,
        policy_decisions=facts.policy_decisions,
        command_outcomes=facts.command_outcomes,
        interactions_created=facts.interactions_created,
        interaction_digests=facts.interaction_digests,
        erased_interaction_digests=facts.erased_interaction_digests,
        event_ids=facts.event_ids,
        event_digests=facts.event_digests,
        erased_event_digests=facts.erased_event_digests,
        outbox_ids=facts.outbox_ids,
        provider_attempts=facts.provider_attempts,
        claim_violations=facts.claim_violations,
        prose_findings=facts.prose_findings,
        claimed_interaction=facts.claimed_interaction,
        copy_renders=facts.copy_renders,
        **extra,
    )


def _digested(record: ReplayRecord) -> dict[str, Any]:
    return {
        "understanding": record.understanding,
        "understanding_hash": record.understanding_hash,
        "reduction_plan": record.reduction_plan,
        "plan_hash": record.plan_hash,
    }


class Recorder:
    """Builds one turn's replay record at each phase from what its audit trail holds."""

    def __init__(self, audit: AuditTrail, clock: Callable[[], int], events: TurnEvents) -> None:
        self.record: ReplayRecord | None = None  # the latest record (set when the turn is accepted)
        self.events = events  # the turn's stream, logged with each bundle
        self._audit = audit
        self._clock = clock
        self._once: dict[str, Any] | None = None
        self._event_digests: dict[str, str] = {}  # each event digested once, not per phase

    def resume(self, record: ReplayRecord) -> None:
        """Carry on from a stored record (recovery): its understanding and plan stay as they
        were recorded."""
        self.record = record
        self._once = _digested(record)

    def accepted(self, user_turn: UserTurnRecord, next_step: str | None = None) -> CommitBundle:
        """The bundle that accepts a turn whose model call is still to come (`next_step`, what
        its stream is told comes next)."""
        assert self.record is not None
        self.events.phase(TurnPhase.RECEIVED)
        if next_step is not None:
            self.events.step(next_step)
        return CommitBundle(
            account_id=user_turn.account_id,
            conversation_id=user_turn.conversation_id,
            turn_id=user_turn.turn_id,
            user_turn=user_turn,
            replay=self.record,
            stream_events=self.events.take(),
        )

    async def committed(self, stores: Stores) -> None:
        """The record and marker `committed`, for a commit whose delivery failed."""
        assert self.record is not None
        record = self.at(TurnPhase.COMMITTED)
        await stores.commits.commit(
            CommitBundle(
                account_id=record.account_id,
                conversation_id=record.conversation_id,
                turn_id=record.turn_id,
                replay=record,
                phase=TurnPhase.COMMITTED,
                stream_events=self.events.take(TurnPhase.COMMITTED),
            )
        )
        self.record = record

    def _digest(self, event: DomainEvent) -> str:
        found = self._event_digests.get(event.event_id)
        if found is None:
            found = self._event_digests[event.event_id] = event_digest(event)
        return found

    def _erased_digest(self, event: DomainEvent) -> str:
        key = f"erased:{event.event_id}"
        found = self._event_digests.get(key)
        if found is None:
            found = self._event_digests[key] = erased_event_digest(event)
        return found

    def at(self, phase: TurnPhase, **extra: Any) -> ReplayRecord:
        """The record at `phase` (built, not stored)."""
        assert self.record is not None, "the turn was not accepted"
        return replay_record(self.record, phase, self._clock(), self.facts(), **extra)

    def facts(self) -> TurnFacts:
        """What the turn's stages returned so far, frozen."""
        audit = self._audit
        if self._once is None and audit.plan is not None:  # final now: digest them once
            understanding = audit.understanding
            dumped = understanding.model_dump(mode="json") if understanding else None
            summary = audit.plan.summary()
            self._once = {
                "understanding": dumped,
                # the same as `understanding.hash()`, without dumping it again
                "understanding_hash": digest(dumped) if dumped is not None else None,
                "reduction_plan": summary,
                "plan_hash": digest(summary) if summary is not None else None,
            }
        executed = audit.executed
        return TurnFacts(
            digested=self._once or {},
            understanding_problems=tuple(audit.understanding_problems),
            target_resolutions=tuple(audit.target_resolutions),
            policy_decisions=tuple(audit.policy_decisions),
            command_outcomes=tuple(
                CommandOutcomeRecord(
                    command_id=e.planned.envelope.command_id,
                    command_type=e.planned.envelope.command_type,
                    idempotency_key=e.planned.envelope.idempotency_key,
                    case_ref=e.planned.envelope.case_ref,
                    origin=e.planned.envelope.origin,
                    outcome=e.outcome,
                )
                for e in executed
            ),
            interactions_created=tuple(audit.interactions_created),
            interaction_digests=tuple(audit.interaction_digests),
            erased_interaction_digests=tuple(audit.erased_interaction_digests),
            event_ids=tuple(ev.event_id for e in executed for ev in e.events),
            event_digests=tuple(self._digest(ev) for e in executed for ev in e.events),
            erased_event_digests=tuple(
                self._erased_digest(ev) for e in executed for ev in e.events
            ),
            outbox_ids=tuple(audit.outbox_ids),
            provider_attempts=tuple(audit.provider_attempts),
            claim_violations=tuple(audit.claim_violations),
            prose_findings=tuple(audit.prose_findings),
            claimed_interaction=audit.claimed_interaction,
            copy_renders=tuple(audit.copy_renders),
        )

    async def deliver(
        self, stores: Stores, turn: AssistantTurn, *, settled: bool = True, **extra: Any
    ) -> None:
        """U/V, in one bundle: the exact turn, its marker and the final replay record (a record
        never says `delivered` for a turn that is not stored). While a command's outcome is
        unknown (`settled` False) the marker stays `committed`: the turn is unfinished until
        recovery reconciles it, though its reply is stored and returned and its record, which
        later records chain to, is final."""
        phase = TurnPhase.DELIVERED if settled else TurnPhase.COMMITTED
        hashes = tuple(block_content_hash(b) for b in turn.blocks)  # the record's and the stream's
        record = self.at(
            TurnPhase.DELIVERED,
            response_block_ids=tuple(b.block_id or "" for b in turn.blocks),
            response_block_hashes=hashes,
            erased_block_hashes=tuple(erased_block_digest(b) for b in turn.blocks),
            **extra,
        )
        self.events.reply(turn, settled=settled, hashes=hashes)  # taken into this bundle at once
        await stores.commits.commit(
            CommitBundle(
                account_id=turn.account_id,
                conversation_id=turn.conversation_id,
                turn_id=turn.turn_id,
                assistant_turn=turn,
                replay=record,
                phase=phase,
                stream_events=self.events.take(),
            )
        )
        self.record = record
        # Counted when written (a transaction this joins and that then rolls back overcounts).
        observe.turn_delivered(record, turn)
