"""What every stage of one turn shares: who and when (`TurnContext`), how what it did not do is
said (`Noticed` values, written by a `Teller` and merged once by `merge_notices`), and what the
audit record will hold (`AuditTrail`).

A stage returns what it says as a `Noticed` value with its result and only appends to the audit
trail; what a stage decides leaves it as its own typed result, never as a flag set here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from turnframe_core import codes
from turnframe_core.cases import CaseRef
from turnframe_core.commands import CommandEnvelope, CommandPolicy
from turnframe_core.copytext import Localized
from turnframe_core.events import DomainEvent
from turnframe_core.replay import (
    CommandOutcome,
    CopyRender,
    PolicyDecisionRecord,
    ProseFinding,
    ProviderAttempt,
    TargetResolutionRecord,
)
from turnframe_core.turn import TurnInput
from turnframe_core.understanding import Problem, Understanding
from turnframe_core.workflow import DomainRefusal
from turnframe_runtime.calls import ModelCall, take_model_call
from turnframe_runtime.copy import CopyRenderError, MissingCopy, ServerCopy, as_params
from turnframe_runtime.reduce import Plan, PlannedCommand

__all__ = [
    "AuditTrail",
    "NOTHING",
    "Executed",
    "Notice",
    "Noticed",
    "Purpose",
    "Refusal",
    "Teller",
    "TurnContext",
    "merge_notices",
    "noticed",
    "policy_decision",
    "provider_attempt",
]


@dataclass(frozen=True)
class TurnContext:
    """One turn's identity and clock reading, fixed when the turn starts."""

    input: TurnInput
    turn_id: str
    now: int

    @property
    def account_id(self) -> str:
        return self.input.account_id

    @property
    def conversation_id(self) -> str:
        return self.input.conversation_id

    @property
    def locale(self) -> str:
        return self.input.locale


@dataclass(frozen=True)
class Notice:
    code: str
    params: Mapping[str, Any] = field(default_factory=dict)
    #: the sentence the notice shows when it is not its code's own template (a refusal, in the
    #: copy the domain named)
    copy: Localized | None = None


Refusal = tuple[CaseRef | None, DomainRefusal]


@dataclass(frozen=True)
class Noticed:
    """What one step says about what it did not do: its notices, in the order they arose, and
    the refusals its narration may state."""

    notices: tuple[Notice, ...] = ()
    refusals: tuple[Refusal, ...] = ()

    def __add__(self, other: Noticed) -> Noticed:
        return Noticed(self.notices + other.notices, self.refusals + other.refusals)


#: a step that has nothing to say
NOTHING = Noticed()


def noticed(code: str, copy: Localized | None = None, **params: Any) -> Noticed:
    """One notice of `code` (with its parameters, or the copy it shows instead)."""
    return Noticed((Notice(code, params, copy),))


def merge_notices(*parts: Noticed) -> Noticed:
    """The notices a turn shows: its steps' notices in the order given (the order they arose),
    each code with the same parameters and copy once; every refusal, in order."""
    notices: list[Notice] = []
    for notice in (n for part in parts for n in part.notices):
        if notice not in notices:
            notices.append(notice)
    return Noticed(tuple(notices), tuple(r for part in parts for r in part.refusals))


@dataclass(frozen=True)
class Teller:
    """Writes the notices of refusals in one turn's locale (rendering their copy once, to check
    it can be written: a sentence that cannot falls back to the domain's words or the generic
    notice)."""

    copy: ServerCopy
    locale: str

    def refuse(self, case_ref: CaseRef | None, refusal: DomainRefusal) -> Noticed:
        """An act that will not run, in the domain's words: the copy its refusal names; the
        runtime's own refusals (whose explanation is their code) and a code a catalog holds a
        template for read from server copy; anything else is the domain's own sentence."""
        explanation = refusal.explanation
        copy: Localized | None = None
        if isinstance(explanation, Localized):
            copy = explanation
        elif explanation == refusal.code and self.copy.has(
            template := f"turnframe.refusal.{refusal.code.rsplit('.', 1)[-1]}"
        ):
            copy = Localized(template_id=template)
        elif self.copy.has(refusal.code):
            copy = Localized(template_id=refusal.code)
        if copy is not None:
            copy = copy.model_copy(update={"params": as_params(copy.params)})
            try:
                text = self.copy.render(copy.template_id, self.locale, copy.params).text
            except (MissingCopy, CopyRenderError):
                copy = None  # its copy cannot be written: the domain's words, or the generic
        if copy is not None:
            said = refusal.model_copy(update={"explanation": text})
            return Noticed((Notice(codes.NOTICE_ACT_REFUSED, {}, copy),), ((case_ref, said),))
        if isinstance(explanation, str) and explanation != refusal.code:
            notice = Notice(codes.NOTICE_ACT_REFUSED, {"explanation": explanation})
            return Noticed((notice,), ((case_ref, refusal),))
        generic = self.copy.render(codes.NOTICE_COMMAND_FAILED, self.locale, {}).text
        said = refusal.model_copy(update={"explanation": generic})
        return Noticed((Notice(codes.NOTICE_COMMAND_FAILED),), ((case_ref, said),))

    def report(self, plan: Plan) -> Noticed:
        """Every act of `plan` that will not run says why: refusals, constraint blocks, policy."""
        said = NOTHING
        for _act_id, case_ref, refusal in plan.refusals:
            said += self.refuse(case_ref, refusal)
        for code in plan.blocked_notices:
            said += noticed(code)
        for _act_id, code in plan.policy_refusals:
            said += self.refuse(None, DomainRefusal(code=code, explanation=code))
        return said


class Purpose(StrEnum):
    """Why a model port was called (recorded with each provider attempt)."""

    UNDERSTAND = "understand"
    ANSWER = "answer"
    TRANSITION = "transition"
    REVIEW = "review"
    #: narration as a whole, when it failed past any one call (the reply fell back to copy)
    NARRATE = "narrate"


@dataclass(frozen=True)
class Executed:
    """One command that ran (or tried to) this turn, in execution order."""

    planned: PlannedCommand
    outcome: CommandOutcome
    events: tuple[DomainEvent, ...] = ()
    #: the executor had seen the command's key: its events may be in the ledger already
    replayed: bool = False


@dataclass
class AuditTrail:
    """What the turn's replay record will say, appended to by each stage as it acts."""

    understanding: Understanding | None = None
    understanding_problems: list[Problem] = field(default_factory=list)
    plan: Plan | None = None
    target_resolutions: list[TargetResolutionRecord] = field(default_factory=list)
    policy_decisions: list[PolicyDecisionRecord] = field(default_factory=list)
    provider_attempts: list[ProviderAttempt] = field(default_factory=list)
    interactions_created: list[str] = field(default_factory=list)
    #: each created card's `content_digest`, in `interactions_created` order
    interaction_digests: list[str] = field(default_factory=list)
    #: each created card's erased form's content digest, in the same order
    erased_interaction_digests: list[str] = field(default_factory=list)
    executed: list[Executed] = field(default_factory=list)
    outbox_ids: list[str] = field(default_factory=list)
    claim_violations: list[str] = field(default_factory=list)
    prose_findings: list[ProseFinding] = field(default_factory=list)
    #: the card this turn won and moved to `resolving`
    claimed_interaction: str | None = None
    #: every sentence of server copy the turn rendered, once each, in order
    copy_renders: list[CopyRender] = field(default_factory=list)
    #: the renders kept so far, by template, text and copy reference (a render equal to one
    #: kept is not kept again; parameters that differ make another render)
    _rendered: dict[tuple[str, str, Any], list[CopyRender]] = field(default_factory=dict)

    def rendered(self, render: CopyRender) -> None:
        same = self._rendered.setdefault((render.template_id, render.text, render.copy_ref), [])
        if render not in same:
            same.append(render)
            self.copy_renders.append(render)

    def decided(self, envelope: CommandEnvelope, policy: CommandPolicy, allowed: bool) -> None:
        """Record the policy decision for one command (what authorized it, or why not)."""
        self.policy_decisions.append(policy_decision(envelope, policy, allowed))

    def attempt(
        self,
        purpose: Purpose,
        port: object,
        started: int,
        now: int,
        failure: BaseException | None = None,
    ) -> None:
        """Record one model call and how it ended (whatever the port says its model is)."""
        self.attempted(provider_attempt(purpose, port, started, now, failure))

    def attempted(self, attempt: ProviderAttempt) -> None:
        """Record one model call, numbered after the calls of its purpose recorded before."""
        number = 1 + sum(1 for a in self.provider_attempts if a.purpose == attempt.purpose)
        self.provider_attempts.append(attempt.model_copy(update={"attempt": number}))


def policy_decision(
    envelope: CommandEnvelope, policy: CommandPolicy, allowed: bool
) -> PolicyDecisionRecord:
    """The policy decision for one command: what authorized it, or why not."""
    return PolicyDecisionRecord(
        command_id=envelope.command_id,
        command_type=envelope.command_type,
        policy=policy,
        origin=envelope.origin,
        allowed=allowed,
        reason_code=codes.POLICY_ALLOWED if allowed else codes.POLICY_TRUSTED_ORIGIN_REQUIRED,
    )


def provider_attempt(
    purpose: Purpose,
    port: object,
    started: int,
    now: int,
    failure: BaseException | None = None,
    discarded: str | None = None,
    *,
    noted: ModelCall | None = None,
) -> ProviderAttempt:
    """One model call and how it ended (whatever the port says its model is, or what it noted
    of the call with `note_model_call`): failed when it raised, or when its answer was
    `discarded` (and why). `noted`: the note taken when the call returned, for an attempt
    recorded after other calls (a draft's, once its review is known); else the note is taken
    now."""
    call = noted if noted is not None else take_model_call()
    model = call.model if call is not None else None
    if not isinstance(model, str):
        model = getattr(port, "model_name", None)
    failed = failure is not None or discarded is not None
    return ProviderAttempt(
        attempt=1,
        purpose=purpose,
        provider=_label(call.provider) if call is not None else type(port).__name__,
        model=_label(model),
        outcome="failed" if failed else "succeeded",
        code=discarded if failure is None else codes.code_of(failure),
        request_id=(_kept(call.request_id) or None) if call is not None else None,
        latency_ms=max(0, now - started),
        prompt_digest=_digest(call.prompt_digest) if call is not None else None,
        input_tokens=_count(call.input_tokens) if call is not None else None,
        output_tokens=_count(call.output_tokens) if call is not None else None,
    )


#: What a prompt digest looks like (`Prompt.digest`); anything else a port notes is left out.
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def _digest(noted: object) -> str | None:
    """A noted prompt digest when it is a `sha256:` digest, else None."""
    return noted if isinstance(noted, str) and _DIGEST.fullmatch(noted) else None


def _count(tokens: int | None) -> int | None:
    """A provider's token count when it is one a record can keep."""
    ok = isinstance(tokens, int) and not isinstance(tokens, bool) and 0 <= tokens < 2**63
    return tokens if ok else None


def _label(text: object) -> str:
    """A port's self-description, fit for the record: at most 200 characters of keepable text,
    "unspecified" when nothing is left (or it is not text)."""
    return _kept(text) or "unspecified"


def _kept(text: object) -> str:
    """At most 200 characters of `text` that every store can keep; "" when it is not text."""
    if not isinstance(text, str):
        return ""
    return text.replace("\x00", "").encode("utf-8", "ignore").decode("utf-8").strip()[:200]
