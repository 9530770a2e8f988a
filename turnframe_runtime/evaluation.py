"""Evaluating an app's model ports on a labelled corpus (`turnframe eval`, docs/eval.md).

A corpus is JSON lines: each line one case (the conversation so far, the user's last message or
click, what must hold of the turn it gets), or one price table. Each case runs on a fresh
conversation of its own account through the app's runtime, both named for the case and the run
(so a second run on a kept database starts afresh); what the case expects is checked
against the last turn and its replay record, never against anything a model says of itself.

While a corpus turn runs, `evaluated_turn()` names it: scripted ports answer from its
`scripted` answers, and an app seeds the case's domain from its `fixture`. Real adapters ignore
both.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from turnframe_core import InteractionResponse, TurnInput, codes
from turnframe_core.blocks import (
    AnswerBlock,
    InteractionBlock,
    NoticeBlock,
    ReceiptBlock,
    TransitionBlock,
)
from turnframe_core.errors import TurnframeError
from turnframe_core.replay import ReplayRecord
from turnframe_core.turn import AssistantTurn, TurnStatus
from turnframe_core.wording import GUARDED_LANGUAGES, GuardConfig, TurnBacking, check_wording
from turnframe_runtime.runtime import TurnRuntime

__all__ = [
    "CaseResult",
    "Corpus",
    "CorpusError",
    "EvalCase",
    "EvalInput",
    "EvaluatedTurn",
    "Expect",
    "ExpectedOperation",
    "ModelPrice",
    "TokenCount",
    "cost_of",
    "evaluated_turn",
    "load_corpus",
    "load_prices",
    "new_run_id",
    "parse_corpus",
    "run_case",
    "run_corpus",
    "tokens_of",
]


class CorpusError(TurnframeError):
    """A corpus (or price table) that cannot be read; the message names the line and the
    field at fault."""

    code = codes.EVAL_CORPUS_INVALID


class _Strict(BaseModel):
    # An unknown key is a typo in a label, which would silently check nothing.
    model_config = ConfigDict(extra="forbid", frozen=True)


class EvalInput(_Strict):
    """One thing the user does: writes `text`, or clicks the option `click` of the latest card
    of the conversation that offers it (with `freeform` words, when the option takes them)."""

    text: str | None = Field(default=None, min_length=1)
    click: str | None = Field(default=None, pattern=r"^opt_[0-9A-Za-z][0-9A-Za-z_-]*$")
    freeform: str | None = None
    #: what scripted ports answer to this input (the app reads it; real adapters ignore it)
    scripted: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_thing(self) -> EvalInput:
        if (self.text is None) == (self.click is None):
            raise ValueError("an input is either a text or a click")
        if self.freeform is not None and self.click is None:
            raise ValueError("freeform words go with a click")
        return self


class ExpectedOperation(_Strict):
    """An act the understanding must propose: its operation and exactly these arguments."""

    operation: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)

    def __str__(self) -> str:
        shown = ", ".join(
            f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in self.arguments.items()
        )
        return f"{self.operation}({shown})"


class Expect(_Strict):
    """What must hold of a case's last turn. A check left out (None) is not made; a case
    expects no claim finding and no model failure unless it says otherwise."""

    #: the understanding's acts, in order (a click without words has none)
    operations: tuple[ExpectedOperation, ...] | None = None
    #: how many questions the understanding asks
    questions: int | None = Field(default=None, ge=0)
    #: the command types the turn ran, in order (committed or not)
    commands: tuple[str, ...] | None = None
    #: the reply's block kinds, in order
    blocks: tuple[str, ...] | None = None
    #: no model prose was kept out (a claim the guard or the reviewer caught, cited facts it
    #: was not given, moves that could not be rendered)
    no_claim_finding: bool = True
    #: every model call of the turn succeeded (its provider attempts; a narrator that failed
    #: leaves server copy in its place, which the blocks alone would not show)
    no_model_failure: bool = True
    #: the turn's locale, every block's rendered copy, and the language model prose reads as
    #: (default: the case's locale)
    locale: str | None = None
    #: how the turn ended
    status: TurnStatus = TurnStatus.COMPLETED


CaseId = Annotated[str, Field(pattern=r"^[0-9A-Za-z][0-9A-Za-z_-]{0,99}$")]


class EvalCase(_Strict):
    """One labelled case: `history` runs first, then `input`, whose turn `expect` judges."""

    id: CaseId
    locale: str = Field(min_length=2)
    #: the account the case runs as (default `eval_<id>`: a case's domain is its own)
    account: str | None = None
    #: the domain the case starts from, in the app's own terms (the eval only passes it on)
    fixture: dict[str, Any] = Field(default_factory=dict)
    history: tuple[EvalInput, ...] = ()
    input: EvalInput
    expect: Expect = Field(default_factory=Expect)

    def account_id(self, run: str) -> str:
        """The account the case runs as in `run` (`eval_<id>_<run>`, or `<account>_<run>`)."""
        return f"{self.account or f'eval_{self.id}'}_{run}"

    def conversation_id(self, run: str) -> str:
        """The case's conversation in `run`: `conv_eval_<id>_<run>`."""
        return f"conv_eval_{self.id}_{run}"


class ModelPrice(_Strict):
    """What a model's tokens cost, in US dollars per million."""

    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)


class _PriceLine(_Strict):
    prices: dict[str, ModelPrice]


@dataclass(frozen=True)
class Corpus:
    cases: tuple[EvalCase, ...]
    #: per model name, as the replay record's provider attempts name it
    prices: Mapping[str, ModelPrice]


def parse_corpus(lines: Iterable[str], *, name: str = "corpus") -> Corpus:
    """The cases and price table of a JSON-lines corpus (blank lines skipped); `CorpusError`
    naming `name`, the line and the field for anything that is not a case or a price table."""
    cases: list[EvalCase] = []
    prices: dict[str, ModelPrice] = {}
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{name} line {number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as bad:
            raise CorpusError(f"{where}: not JSON ({bad.msg})") from None
        if not isinstance(data, dict):
            raise CorpusError(f"{where}: a line is a JSON object (a case or a price table)")
        try:
            if set(data) == {"prices"}:
                prices.update(_PriceLine.model_validate(data).prices)
                continue
            case = EvalCase.model_validate(data)
        except ValidationError as invalid:
            raise CorpusError(f"{where}: {_first_problem(invalid)}") from None
        if case.id in seen:
            raise CorpusError(f"{where}: case id {case.id!r} is used twice")
        seen.add(case.id)
        cases.append(case)
    if not cases:
        raise CorpusError(f"{name}: no cases")
    return Corpus(cases=tuple(cases), prices=prices)


def load_corpus(path: str | Path) -> Corpus:
    """`parse_corpus` over a file; `CorpusError` when it cannot be read."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as unreadable:
        raise CorpusError(f"cannot read {path}: {unreadable}") from None
    return parse_corpus(text.splitlines(), name=path.name)


def load_prices(path: str | Path) -> dict[str, ModelPrice]:
    """A price table file: `{"model": {"input_per_million": …, "output_per_million": …}}`."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return _PriceLine.model_validate({"prices": data}).prices
    except (OSError, UnicodeDecodeError) as unreadable:
        raise CorpusError(f"cannot read {path}: {unreadable}") from None
    except json.JSONDecodeError as bad:
        raise CorpusError(f"{path.name}: not JSON ({bad.msg})") from None
    except ValidationError as invalid:
        raise CorpusError(f"{path.name}: {_first_problem(invalid)}") from None


def _first_problem(invalid: ValidationError) -> str:
    error = invalid.errors(include_url=False, include_input=False)[0]
    at = ".".join(str(p) for p in error["loc"] if p != "prices" or len(error["loc"]) == 1)
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{at}: {message}" if at else message


# --- the turn being evaluated ------------------------------------------------------------------


@dataclass(frozen=True)
class EvaluatedTurn:
    """A corpus turn running now: the case, which of its inputs (`index` counts the history
    first; `index == len(case.history)` is the input the case judges) and the run."""

    case: EvalCase
    index: int
    input: EvalInput
    run: str

    @property
    def judged(self) -> bool:
        return self.index == len(self.case.history)

    @property
    def account_id(self) -> str:
        return self.case.account_id(self.run)

    @property
    def conversation_id(self) -> str:
        return self.case.conversation_id(self.run)


_CURRENT: ContextVar[EvaluatedTurn | None] = ContextVar("turnframe_evaluated_turn", default=None)


def evaluated_turn() -> EvaluatedTurn | None:
    """The corpus turn `turnframe eval` runs in this context, if any."""
    return _CURRENT.get()


# --- usage and cost ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TokenCount:
    """A case's tokens: what its judged turn's provider attempts report, summed."""

    input_tokens: int
    output_tokens: int


def tokens_of(attempts: Sequence[Mapping[str, Any]]) -> TokenCount | None:
    """The tokens the provider attempts report (`input_tokens`, `output_tokens`), summed; None
    when none reports any."""
    reported = [a for a in attempts if a.get("input_tokens") is not None]
    if not reported:
        return None
    return TokenCount(
        input_tokens=sum(int(a["input_tokens"]) for a in reported),
        output_tokens=sum(int(a.get("output_tokens") or 0) for a in reported),
    )


def cost_of(
    attempts: Sequence[Mapping[str, Any]], prices: Mapping[str, ModelPrice]
) -> float | None:
    """What the attempts' tokens cost in US dollars; None when none reports tokens or a model
    that does has no price."""
    reported = [a for a in attempts if a.get("input_tokens") is not None]
    if not reported or any(a.get("model") not in prices for a in reported):
        return None
    return sum(
        (
            int(a["input_tokens"]) * prices[a["model"]].input_per_million
            + int(a.get("output_tokens") or 0) * prices[a["model"]].output_per_million
        )
        / 1_000_000
        for a in reported
    )


# --- running -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseResult:
    case_id: str
    locale: str
    #: why the case failed, one line per broken expectation (empty: it passed)
    reasons: tuple[str, ...]
    #: the reply's block kinds (empty when no turn came back)
    blocks: tuple[str, ...] = ()
    #: the judged turn's wall time
    latency_ms: int | None = None
    #: the judged turn's tokens (None when no attempt reports any)
    usage: TokenCount | None = None
    cost_usd: float | None = None

    @property
    def passed(self) -> bool:
        return not self.reasons


class _CaseFailed(Exception):
    """A case cannot go on (a click on a card the conversation never showed)."""


def new_run_id() -> str:
    """A fresh run id (8 hex digits), which names every account and conversation of a run."""
    return secrets.token_hex(4)


async def run_corpus(runtime: TurnRuntime, corpus: Corpus, *, run: str) -> list[CaseResult]:
    """Every case of `corpus` through `runtime`, in order, as run `run` (`new_run_id()`)."""
    return [await run_case(runtime, case, corpus.prices, run=run) for case in corpus.cases]


async def run_case(
    runtime: TurnRuntime,
    case: EvalCase,
    prices: Mapping[str, ModelPrice] | None = None,
    *,
    run: str,
) -> CaseResult:
    """`case` on its own conversation of run `run`: its history, then its input, whose turn
    is judged."""
    turns: list[AssistantTurn] = []
    latency_ms = 0
    for index, step in enumerate((*case.history, case.input)):
        where = "the judged turn" if index == len(case.history) else f"history turn {index + 1}"
        evaluated = EvaluatedTurn(case=case, index=index, input=step, run=run)
        token = _CURRENT.set(evaluated)
        try:
            turn_input = _turn_input(evaluated, turns)
            started = time.perf_counter()
            turns.append(await runtime.handle_turn(turn_input))
            latency_ms = round((time.perf_counter() - started) * 1000)
        except _CaseFailed as failed:
            return CaseResult(case.id, case.locale, (f"{where}: {failed}",))
        except Exception as error:  # an app's port or executor may raise anything: a case fails
            return CaseResult(case.id, case.locale, (f"{where} raised {_error(error)}",))
        finally:
            _CURRENT.reset(token)
    turn = turns[-1]
    try:
        record = await runtime.replay(case.account_id(run), turn.replay_token)
    except Exception as error:  # a store may raise anything: the case fails, the run goes on
        return CaseResult(
            case.id,
            case.locale,
            (f"the judged turn's replay raised {_error(error)}",),
            blocks=tuple(b.kind for b in turn.blocks),
            latency_ms=latency_ms,
        )
    attempts = [a.model_dump() for a in record.provider_attempts]
    return CaseResult(
        case_id=case.id,
        locale=case.locale,
        reasons=tuple(_check(case, turn, record, runtime.config.guard)),
        blocks=tuple(b.kind for b in turn.blocks),
        latency_ms=latency_ms,
        usage=tokens_of(attempts),
        cost_usd=cost_of(attempts, prices or {}),
    )


def _error(error: Exception) -> str:
    message = error.message if isinstance(error, TurnframeError) else str(error)
    return f"{type(error).__name__}: {message[:200]}" if message else type(error).__name__


def _turn_input(evaluated: EvaluatedTurn, turns: Sequence[AssistantTurn]) -> TurnInput:
    step, locale = evaluated.input, evaluated.case.locale
    if step.click is None:
        return TurnInput(
            account_id=evaluated.account_id,
            conversation_id=evaluated.conversation_id,
            text=step.text,
            locale=locale,
        )
    card = _card_offering(step.click, turns)
    return TurnInput(
        account_id=evaluated.account_id,
        conversation_id=evaluated.conversation_id,
        locale=locale,
        interaction_response=InteractionResponse(
            interaction_id=card.interaction_id,
            option_id=step.click,
            expected_case_revision=card.case_revision,
            freeform_input=step.freeform,
        ),
    )


def _card_offering(option_id: str, turns: Sequence[AssistantTurn]) -> InteractionBlock:
    """The latest card shown that offers `option_id`."""
    for turn in reversed(turns):
        for block in turn.blocks:
            if isinstance(block, InteractionBlock) and any(
                o.option_id == option_id for o in block.options
            ):
                return block
    raise _CaseFailed(f"it clicks {option_id} but no card of the conversation offers it")


# --- checks ------------------------------------------------------------------------------------


def _check(
    case: EvalCase, turn: AssistantTurn, record: ReplayRecord, guard: GuardConfig
) -> list[str]:
    expect = case.expect
    understanding = record.understanding or {}
    reasons: list[str] = []
    if turn.status is not expect.status:
        reasons.append(f"status: expected {expect.status.value}, got {turn.status.value}")
    if expect.operations is not None:
        got = [_operation(a) for a in understanding.get("acts", ())]
        wanted = [str(o) for o in expect.operations]
        if got != wanted:
            reasons.append(f"operations: expected {_listed(wanted)}, got {_listed(got)}")
    if expect.questions is not None:
        asked = len(understanding.get("questions", ()))
        if asked != expect.questions:
            reasons.append(f"questions: expected {expect.questions}, got {asked}")
    if expect.commands is not None:
        ran = [o.command_type for o in record.command_outcomes]
        if ran != list(expect.commands):
            reasons.append(f"commands: expected {_listed(expect.commands)}, got {_listed(ran)}")
    kinds = [b.kind for b in turn.blocks]
    if expect.blocks is not None and kinds != list(expect.blocks):
        reasons.append(f"blocks: expected {_listed(expect.blocks)}, got {_listed(kinds)}")
    if expect.no_claim_finding:
        found = [*record.claim_violations, *(f"{f.check}:{f.code}" for f in record.prose_findings)]
        if found:
            reasons.append(f"claim findings: {_listed(found)}")
    if expect.no_model_failure:
        failed = [
            f"{a.purpose}:{a.code or 'failed'}"
            for a in record.provider_attempts
            if a.outcome == "failed"
        ]
        if failed:
            reasons.append(f"model failures: {_listed(failed)}")
    locale = expect.locale or case.locale
    if turn.locale != locale:
        reasons.append(f"locale: the turn is in {turn.locale}, expected {locale}")
    for n, block in enumerate(turn.blocks):
        if not isinstance(block, _RENDERED):
            continue
        copy_ref = block.copy_ref
        if copy_ref is not None and copy_ref.locale != locale:
            reasons.append(
                f"locale: block {n} ({block.kind}) was rendered in {copy_ref.locale}, "
                f"expected {locale}"
            )
        elif copy_ref is None and isinstance(block, AnswerBlock | TransitionBlock):
            problem = _prose_language(block.text, locale, guard)
            if problem:
                reasons.append(f"locale: block {n} ({block.kind}) is model prose {problem}")
    return reasons


def _prose_language(text: str, locale: str, guard: GuardConfig) -> str | None:
    """Why model prose does not read as `locale` (the wording guard's language reading, with
    the app's ordinary words, in every language the guard reads, even one the app's guard
    leaves unchecked); None when it does, or is too short to tell."""
    language = locale.split("-")[0].split("_")[0].lower()
    if language not in GUARDED_LANGUAGES:
        return f"in {locale}, which the wording guard cannot read (locale not checked)"
    reading = replace(guard, unchecked_languages=frozenset())
    findings = check_wording(text, locale, TurnBacking(), reading)
    if any(f.code == codes.CLAIM_UNJUDGED_LANGUAGE for f in findings):
        return f"not written in {locale}"
    return None


#: the blocks whose words may be server copy rendered in a locale (their `copy_ref`)
_RENDERED = (AnswerBlock, TransitionBlock, ReceiptBlock, NoticeBlock)


def _operation(act: Mapping[str, Any]) -> str:
    arguments = {a["name"]: a["value"] for a in act.get("arguments", ())}
    return str(ExpectedOperation(operation=act["operation"], arguments=arguments))


def _listed(items: Sequence[str]) -> str:
    return "[" + ", ".join(items) + "]" if items else "nothing"
