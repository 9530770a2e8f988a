"""What an Interpreter proposes for a turn, what it was offered, and the all-or-nothing check.

An `Understanding` is a proposal, never an effect: acts on offered operations, questions,
constraints ("do not submit") and card answers, each pinned to a verbatim quote of the user's text.
The Interpreter sees only a `Brief`: opaque per-turn handles (never database ids), the operations
on offer with their argument names, the card on screen. `validate_understanding` checks a proposal
against its brief and either accepts all of it or rejects all of it, listing every problem by code
and path. A problem never quotes the user's text or the model's values.

A value the Interpreter chose must be grounded: a free-text value (every string and number in it)
occurs in the user's text, compared case- and space-insensitively, unless the operation types the
argument (`ValueRule`: an email address, an ISO date, one of a set of choices, an amount) and the
value parses as that type. So a model cannot put words in the user's mouth that server copy then
quotes.

Missing required arguments are not a rejection: the reducer turns them into a question for the
user. The brief lists them so the Interpreter knows what to look for.

The brief also carries a `ConversationMemory`: what the last replies asked, offered and showed,
typed and capped, by the brief's own handles. It informs a proposal and grants nothing.
"""

from __future__ import annotations

import datetime
import math
import re
import unicodedata
from collections.abc import Iterator, Sequence
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import Annotated, Any, Final, Literal

from pydantic import (
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    StringConstraints,
    field_validator,
    model_serializer,
    model_validator,
)

from turnframe_core import codes
from turnframe_core.canonical import CanonicalJsonError, canonical_json, digest
from turnframe_core.cases import RecordKind, WorkflowKey
from turnframe_core.errors import TurnframeError
from turnframe_core.ids import InteractionId, OptionId
from turnframe_core.limits import MAX_JSON_DEPTH, json_value_problem
from turnframe_core.model import FrozenModel, NonEmptyStr

__all__ = [
    "MEMORY_ITEMS",
    "MEMORY_MAX_CHARS",
    "MEMORY_MISSING",
    "MEMORY_TURNS",
    "ActId",
    "AmbiguousTarget",
    "ArgumentValue",
    "Brief",
    "CardAnswerProposal",
    "CardEnding",
    "CardTarget",
    "Constraint",
    "ConstraintKind",
    "ConversationMemory",
    "Evidence",
    "ExpectationKind",
    "Handle",
    "HandleTarget",
    "NamedReference",
    "NewRecord",
    "OfferedCard",
    "OfferedHandle",
    "OfferedOperation",
    "OfferedRecord",
    "Problem",
    "ProposedAct",
    "Question",
    "QuestionId",
    "RememberedCard",
    "RememberedOffer",
    "RememberedQuestion",
    "RememberedTurn",
    "Target",
    "Understanding",
    "UnderstandingRejected",
    "ValueKind",
    "ValueRule",
    "act",
    "ambiguous_act",
    "constraint",
    "named_record",
    "question",
    "understanding_of",
    "validate_understanding",
]

#: An opaque per-turn reference to a case; only the runtime knows which case it stands for.
Handle = Annotated[str, StringConstraints(pattern=r"^h[0-9a-z]{1,32}$")]
ActId = Annotated[str, StringConstraints(pattern=r"^a[0-9]{1,4}$")]
QuestionId = Annotated[str, StringConstraints(pattern=r"^q[0-9]{1,4}$")]


# --- targets ------------------------------------------------------------------------------------


class HandleTarget(FrozenModel):
    """An existing case, by the handle the brief issued for it."""

    kind: Literal["handle"] = "handle"
    handle: Handle


class NewRecord(FrozenModel):
    """A case that does not exist yet, of a workflow the brief allows to start."""

    kind: Literal["new_record"] = "new_record"
    workflow: WorkflowKey


class CardTarget(FrozenModel):
    """The case of the card on screen."""

    kind: Literal["card"] = "card"


class AmbiguousTarget(FrozenModel):
    """The user's words fit several cases; the runtime asks, it never picks one."""

    kind: Literal["ambiguous"] = "ambiguous"
    handles: tuple[Handle, ...] = Field(min_length=2)

    @field_validator("handles")
    @classmethod
    def _distinct(cls, handles: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(handles)) != len(handles):
            raise ValueError("an ambiguity lists distinct handles")
        return handles


Target = Annotated[
    HandleTarget | NewRecord | CardTarget | AmbiguousTarget, Field(discriminator="kind")
]


# --- proposals ----------------------------------------------------------------------------------


class Evidence(FrozenModel):
    """A verbatim span of the user's text that the proposal rests on."""

    quote: NonEmptyStr


class ArgumentValue(FrozenModel):
    """One argument of an act: a JSON value and the words it was read from."""

    name: NonEmptyStr
    value: JsonValue
    evidence: Evidence

    @field_validator("value")
    @classmethod
    def _canonical(cls, value: JsonValue) -> JsonValue:
        problem = json_value_problem(value)
        if problem is not None:
            raise ValueError(f"an argument value {problem}")
        try:
            canonical_json(value)
        except CanonicalJsonError:
            raise ValueError("an argument value needs a canonical JSON form") from None
        return value


class ProposedAct(FrozenModel):
    """One operation the user asked for; `corrects`/`cancels` name an earlier act of this turn."""

    act_id: ActId
    operation: NonEmptyStr
    target: Target
    arguments: tuple[ArgumentValue, ...] = ()
    evidence: Evidence
    corrects: ActId | None = None
    cancels: ActId | None = None


class Question(FrozenModel):
    """Something the user asked; `about` names the cases it concerns, `hypothetical` a what-if."""

    question_id: QuestionId
    text: NonEmptyStr
    about: tuple[Handle, ...] = ()
    hypothetical: bool = False


class ConstraintKind(StrEnum):
    DO_NOT_SUBMIT = "do_not_submit"
    DO_NOT_DELETE = "do_not_delete"
    NO_EXTERNAL_EFFECTS = "no_external_effects"
    ASK_BEFORE_APPLYING = "ask_before_applying"


class Constraint(FrozenModel):
    """A limit the user put on this turn's effects; the reducer enforces it."""

    kind: ConstraintKind
    evidence: Evidence


class CardAnswerProposal(FrozenModel):
    """The user's words read as an answer to the card on screen (only a card that accepts text)."""

    interaction_id: InteractionId
    option_id: OptionId
    evidence: Evidence


class NamedReference(FrozenModel):
    """A record the user named, of a kind the brief offers, by the reference they wrote (a
    booking reference, an order number): the runtime looks its case up, never the model."""

    record: RecordKind
    reference: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    evidence: Evidence


class Understanding(FrozenModel):
    """Everything an Interpreter proposes for one turn. A proposal, never an effect."""

    acts: tuple[ProposedAct, ...] = ()
    questions: tuple[Question, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    card_answers: tuple[CardAnswerProposal, ...] = ()
    lookups: tuple[NamedReference, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not (
            self.acts or self.questions or self.constraints or self.card_answers or self.lookups
        )

    def hash(self) -> str:
        """`sha256:` digest of the canonical JSON; equal understandings share it."""
        return digest(self)


# --- the offer ----------------------------------------------------------------------------------


class ValueKind(StrEnum):
    """How an argument's value is read: free text (grounded in the user's words) or a type."""

    TEXT = "text"
    EMAIL = "email"
    #: an ISO 8601 calendar date, YYYY-MM-DD
    DATE = "date"
    #: one of the rule's `choices`, exactly
    ENUM = "enum"
    #: a decimal number, as a JSON number or its text ("12.50")
    AMOUNT = "amount"


class ValueRule(FrozenModel):
    """The type an argument's value must parse as; `choices` lists an enum's values."""

    kind: ValueKind = ValueKind.TEXT
    choices: tuple[NonEmptyStr, ...] = ()

    @model_validator(mode="after")
    def _choices_for_enums(self) -> ValueRule:
        if (self.kind is ValueKind.ENUM) != bool(self.choices):
            raise ValueError("choices are given for an enum, and only for an enum")
        return self

    def accepts(self, value: Any) -> bool:
        """Whether `value` parses as this rule's type (free text accepts any value; whether it
        is grounded is judged against the user's words)."""
        if self.kind is ValueKind.TEXT:
            return True
        if self.kind is ValueKind.ENUM:
            return isinstance(value, str) and value in self.choices
        if self.kind is ValueKind.AMOUNT:
            return _amount(value)
        if not isinstance(value, str):
            return False
        if self.kind is ValueKind.EMAIL:
            return len(value) <= 254 and _EMAIL.fullmatch(value) is not None
        if _ISO_DATE.fullmatch(value) is None:
            return False
        try:
            datetime.date.fromisoformat(value)
        except ValueError:
            return False
        return True


_EMAIL = re.compile(r"[^@\s\x00-\x1f]{1,64}@[^@\s\x00-\x1f.]+(?:\.[^@\s\x00-\x1f.]+)+")
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_AMOUNT = re.compile(r"-?[0-9]{1,15}(?:\.[0-9]{1,6})?")


def _amount(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) < 10**15
    if isinstance(value, float):
        return math.isfinite(value) and abs(value) < 10**15
    if isinstance(value, str) and _AMOUNT.fullmatch(value):
        try:
            Decimal(value)
        except InvalidOperation:  # pragma: no cover - the pattern admits decimals only
            return False
        return True
    return False


class OfferedOperation(FrozenModel):
    """An operation on offer this turn, the argument names it takes and the typed ones' rules
    (an argument without a rule is free text)."""

    operation: NonEmptyStr
    arguments: tuple[NonEmptyStr, ...] = ()
    required: tuple[NonEmptyStr, ...] = ()
    rules: dict[NonEmptyStr, ValueRule] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _required_are_arguments(self) -> OfferedOperation:
        if len(set(self.arguments)) != len(self.arguments):
            raise ValueError("argument names of an offered operation are unique")
        if not set(self.required) <= set(self.arguments):
            raise ValueError("required arguments are among the operation's arguments")
        if not set(self.rules) <= set(self.arguments):
            raise ValueError("value rules name the operation's arguments")
        return self


class OfferedHandle(FrozenModel):
    """A case the turn may refer to, under an opaque handle and a label the user would recognise."""

    handle: Handle
    label: NonEmptyStr
    workflow: WorkflowKey


class OfferedRecord(FrozenModel):
    """A kind of record the user may name this turn, and the workflow of its cases."""

    record: RecordKind
    workflow: WorkflowKey


class OfferedCard(FrozenModel):
    """The card on screen and its option ids; `accepts_text` when typed words may answer it."""

    interaction_id: InteractionId
    option_ids: tuple[OptionId, ...] = Field(min_length=1)
    accepts_text: bool = False


# --- conversation memory ------------------------------------------------------------------------
# What the last replies asked, offered and showed, as typed context with hard caps (never text):
# each case by this brief's handle, or by none when the brief issued no handle for it (it left
# the conversation, or the account may no longer reach it). Memory informs a proposal and never
# grants one: what a model proposes from it is validated, reduced and confirmed like anything.

#: The replies a memory reads: the conversation's last `MEMORY_TURNS` assistant turns.
MEMORY_TURNS: Final = 5
#: The most items any one list of a memory holds (the newest are kept).
MEMORY_ITEMS: Final = 10
#: The most missing argument names an open question lists.
MEMORY_MISSING: Final = 5
#: The longest a memory's canonical JSON can be, whatever the conversation's length: every list
#: full and every name at its longest (a test builds that memory and measures it).
MEMORY_MAX_CHARS: Final = 22_000

#: How many replies ago (1: the reply the user is answering now).
_TurnsAgo = Annotated[int, Field(strict=True, ge=1, le=MEMORY_TURNS)]
#: An operation's or argument's name, as a workflow declares it (never the user's words).
_Name = Annotated[str, StringConstraints(max_length=100, pattern=r"^[a-z][a-z0-9_.]*$")]


class ExpectationKind(StrEnum):
    """What a reply waits for from the user."""

    AWAITING_VALUE = "awaiting_value"
    AWAITING_OBLIGATION = "awaiting_obligation"
    AWAITING_CONFIRMATION = "awaiting_confirmation"
    AWAITING_SELECTION = "awaiting_selection"


class CardEnding(StrEnum):
    """How a card a reply showed stands now."""

    OPEN = "open"
    ANSWERED = "answered"
    #: answered, but what the answer ran failed
    FAILED = "failed"
    DECLINED = "declined"
    DISMISSED = "dismissed"
    #: the case moved on or a newer card took its place
    SUPERSEDED = "superseded"
    EXPIRED = "expired"


class RememberedQuestion(FrozenModel):
    """Something a reply asked that is still open; `interaction_id` names the card asking it."""

    turns_ago: _TurnsAgo
    kind: ExpectationKind
    handle: Handle | None = None
    operation: _Name | None = None
    missing: tuple[_Name, ...] = Field(default=(), max_length=MEMORY_MISSING)
    interaction_id: InteractionId | None = None


class RememberedOffer(FrozenModel):
    """A next step a reply offered. Taking it up is a new act the user states; it is judged
    and confirmed like any other."""

    turns_ago: _TurnsAgo
    operation: _Name
    handle: Handle | None = None


class RememberedCard(FrozenModel):
    """A card a reply showed and how it stands; `chosen_option`, once it ended, the option it
    was answered with (a declining one too). A card that asked which case: `choices`, the cases
    it offered, and `chosen_handle`, the one the answer chose."""

    turns_ago: _TurnsAgo
    interaction_id: InteractionId
    handle: Handle | None = None
    ending: CardEnding
    chosen_option: OptionId | None = None
    choices: tuple[Handle, ...] = Field(default=(), max_length=MEMORY_ITEMS)
    chosen_handle: Handle | None = None


class RememberedTurn(FrozenModel):
    """The cases a reply was about, by this brief's handles."""

    turns_ago: _TurnsAgo
    handles: tuple[Handle, ...] = Field(default=(), max_length=MEMORY_ITEMS)


class ConversationMemory(FrozenModel):
    """What the last replies of the conversation asked, offered and showed, newest first; each
    list holds at most `MEMORY_ITEMS` (`turns`: `MEMORY_TURNS`), so a memory's canonical JSON
    stays within `MEMORY_MAX_CHARS` however long the conversation."""

    open_questions: tuple[RememberedQuestion, ...] = Field(default=(), max_length=MEMORY_ITEMS)
    offers: tuple[RememberedOffer, ...] = Field(default=(), max_length=MEMORY_ITEMS)
    cards: tuple[RememberedCard, ...] = Field(default=(), max_length=MEMORY_ITEMS)
    turns: tuple[RememberedTurn, ...] = Field(default=(), max_length=MEMORY_TURNS)

    @property
    def is_empty(self) -> bool:
        return not (self.open_questions or self.offers or self.cards or self.turns)

    def handles(self) -> set[str]:
        """Every handle the memory names."""
        named: set[str | None] = {h for turn in self.turns for h in turn.handles}
        for card in self.cards:
            named.update((*card.choices, card.handle, card.chosen_handle))
        named.update(question.handle for question in self.open_questions)
        named.update(offer.handle for offer in self.offers)
        return {handle for handle in named if handle is not None}


class Brief(FrozenModel):
    """All an Interpreter sees of a turn: the user's text, opaque handles, no write tools."""

    text: str | None
    locale: NonEmptyStr
    handles: tuple[OfferedHandle, ...] = ()
    operations: tuple[OfferedOperation, ...] = ()
    card_on_screen: OfferedCard | None = None
    new_record_workflows: tuple[WorkflowKey, ...] = ()
    #: the records the user may name (each kind once); a found case gets a handle
    records: tuple[OfferedRecord, ...] = ()
    memory: ConversationMemory = Field(default_factory=ConversationMemory)

    @model_validator(mode="after")
    def _unique_offers(self) -> Brief:
        handles = [offered.handle for offered in self.handles]
        if len(set(handles)) != len(handles):
            raise ValueError("a brief issues each handle once")
        records = [offered.record for offered in self.records]
        if len(set(records)) != len(records):
            raise ValueError("a brief offers each kind of record once")
        operations = [offered.operation for offered in self.operations]
        if len(set(operations)) != len(operations):
            raise ValueError("a brief offers each operation once")
        return self

    @model_validator(mode="after")
    def _memory_names_issued_handles(self) -> Brief:
        if not self.memory.handles() <= {offered.handle for offered in self.handles}:
            raise ValueError("a brief's memory names only the handles the brief issues")
        return self

    @model_serializer(mode="wrap")
    def _without_empty_memory(self, handler: SerializerFunctionWrapHandler) -> Any:
        """An empty memory, and no record to name, are left out: a brief without them reads as
        it did before either existed (a model request's bytes do not change)."""
        data = handler(self)
        if isinstance(data, dict):
            if self.memory.is_empty:
                data.pop("memory", None)
            if not self.records:
                data.pop("records", None)
        return data


# --- validation ---------------------------------------------------------------------------------


class Problem(FrozenModel):
    """One reason an understanding was rejected: a stable code and a path, never a value."""

    code: NonEmptyStr
    path: NonEmptyStr


class UnderstandingRejected(TurnframeError):
    """The whole understanding was refused; `problems` lists every reason by code and path."""

    code = codes.UNDERSTANDING_REJECTED

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        listed = "; ".join(f"{p.code} at {p.path}" for p in self.problems)
        super().__init__(f"understanding rejected, {len(self.problems)} problem(s): {listed}")


def _evidence_problems(evidence: Evidence, path: str, text: str | None) -> Iterator[Problem]:
    if text is None or evidence.quote not in text:
        yield Problem(code=codes.UNDERSTANDING_EVIDENCE_NOT_IN_TEXT, path=f"{path}.evidence")


def _target_problems(
    target: Target, path: str, brief: Brief, handles: frozenset[str]
) -> Iterator[Problem]:
    if isinstance(target, HandleTarget):
        if target.handle not in handles:
            yield Problem(code=codes.UNDERSTANDING_UNKNOWN_HANDLE, path=f"{path}.handle")
    elif isinstance(target, AmbiguousTarget):
        for index, handle in enumerate(target.handles):
            if handle not in handles:
                yield Problem(
                    code=codes.UNDERSTANDING_UNKNOWN_HANDLE, path=f"{path}.handles[{index}]"
                )
    elif isinstance(target, NewRecord):
        if target.workflow not in brief.new_record_workflows:
            yield Problem(code=codes.UNDERSTANDING_UNKNOWN_WORKFLOW, path=f"{path}.workflow")
    elif brief.card_on_screen is None:
        yield Problem(code=codes.UNDERSTANDING_UNKNOWN_INTERACTION, path=path)


def _act_problems(
    index: int,
    act: ProposedAct,
    brief: Brief,
    handles: frozenset[str],
    earlier_acts: frozenset[str],
) -> Iterator[Problem]:
    path = f"acts[{index}]"
    if act.act_id in earlier_acts:
        yield Problem(code=codes.UNDERSTANDING_DUPLICATE_ID, path=f"{path}.act_id")
    offered = next((o for o in brief.operations if o.operation == act.operation), None)
    if offered is None:
        yield Problem(code=codes.UNDERSTANDING_UNKNOWN_OPERATION, path=f"{path}.operation")
    yield from _target_problems(act.target, f"{path}.target", brief, handles)
    seen_names: set[str] = set()
    for arg_index, argument in enumerate(act.arguments):
        arg_path = f"{path}.arguments[{arg_index}]"
        # An unknown operation has no argument names to check against; its own problem suffices.
        if offered is not None and argument.name not in offered.arguments:
            yield Problem(code=codes.UNDERSTANDING_UNKNOWN_ARGUMENT, path=arg_path)
        elif argument.name in seen_names:
            yield Problem(code=codes.UNDERSTANDING_DUPLICATE_ARGUMENT, path=arg_path)
        seen_names.add(argument.name)
        yield from _evidence_problems(argument.evidence, arg_path, brief.text)
        if offered is not None and argument.name in offered.arguments:
            yield from _value_problems(argument, offered.rules.get(argument.name), arg_path, brief)
    yield from _evidence_problems(act.evidence, path, brief.text)
    for field, reference in (("corrects", act.corrects), ("cancels", act.cancels)):
        if reference is not None and reference not in earlier_acts:
            yield Problem(code=codes.UNDERSTANDING_DANGLING_REFERENCE, path=f"{path}.{field}")


def _problems(understanding: Understanding, brief: Brief) -> Iterator[Problem]:
    handles = frozenset(offered.handle for offered in brief.handles)
    earlier_acts: set[str] = set()
    for index, act in enumerate(understanding.acts):
        yield from _act_problems(index, act, brief, handles, frozenset(earlier_acts))
        earlier_acts.add(act.act_id)

    question_ids: set[str] = set()
    for index, question in enumerate(understanding.questions):
        path = f"questions[{index}]"
        if question.question_id in question_ids:
            yield Problem(code=codes.UNDERSTANDING_DUPLICATE_ID, path=f"{path}.question_id")
        question_ids.add(question.question_id)
        if brief.text is None:  # a question needs words the user wrote
            yield Problem(code=codes.UNDERSTANDING_EVIDENCE_NOT_IN_TEXT, path=path)
        for about_index, handle in enumerate(question.about):
            if handle not in handles:
                yield Problem(
                    code=codes.UNDERSTANDING_UNKNOWN_HANDLE, path=f"{path}.about[{about_index}]"
                )

    for index, constraint in enumerate(understanding.constraints):
        yield from _evidence_problems(constraint.evidence, f"constraints[{index}]", brief.text)

    card = brief.card_on_screen
    answered: set[str] = set()
    for index, answer in enumerate(understanding.card_answers):
        path = f"card_answers[{index}]"
        # A card that does not take typed answers is, to an Interpreter, no card at all.
        if card is None or not card.accepts_text or answer.interaction_id != card.interaction_id:
            yield Problem(
                code=codes.UNDERSTANDING_UNKNOWN_INTERACTION, path=f"{path}.interaction_id"
            )
        elif answer.option_id not in card.option_ids:
            yield Problem(code=codes.UNDERSTANDING_UNKNOWN_OPTION, path=f"{path}.option_id")
        if answer.interaction_id in answered:
            yield Problem(code=codes.UNDERSTANDING_DUPLICATE_ID, path=f"{path}.interaction_id")
        answered.add(answer.interaction_id)
        yield from _evidence_problems(answer.evidence, path, brief.text)

    yield from _lookup_problems(understanding.lookups, brief)


def _lookup_problems(lookups: Sequence[NamedReference], brief: Brief) -> Iterator[Problem]:
    """A named record is of a kind the brief offers, and its reference is the user's words."""
    offered = {record.record for record in brief.records}
    folded = _folded(brief.text or "")
    for index, named in enumerate(lookups):
        path = f"lookups[{index}]"
        if named.record not in offered:
            yield Problem(code=codes.UNDERSTANDING_UNKNOWN_RECORD, path=f"{path}.record")
        if not _grounded(named.reference, folded):
            yield Problem(code=codes.UNDERSTANDING_VALUE_NOT_GROUNDED, path=f"{path}.reference")
        yield from _evidence_problems(named.evidence, path, brief.text)


def _value_problems(
    argument: ArgumentValue, rule: ValueRule | None, path: str, brief: Brief
) -> Iterator[Problem]:
    """A typed value parses as its type; any other value is grounded in the user's words."""
    if rule is not None and rule.kind is not ValueKind.TEXT:
        if not rule.accepts(argument.value):
            yield Problem(code=codes.UNDERSTANDING_VALUE_NOT_PARSED, path=f"{path}.value")
    elif not _grounded(argument.value, _folded(brief.text or "")):
        yield Problem(code=codes.UNDERSTANDING_VALUE_NOT_GROUNDED, path=f"{path}.value")


def _folded(text: str) -> str:
    """Text as grounding compares it: NFKC, case-folded, runs of space as one space."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _grounded(value: Any, folded_text: str) -> bool:
    """Every string and number in a free-text value, and every key of an object in it, occurs
    in the user's (folded) text as whole words: "ace" is not grounded by "Grace"."""
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, str):
        words = _folded(value)
        return not words or _occurs(words, folded_text)
    if isinstance(value, int | float):
        return _occurs(_folded(str(value)), folded_text)
    if isinstance(value, list):
        return all(_grounded(item, folded_text) for item in value)
    if isinstance(value, dict):
        return all(
            _grounded(key, folded_text) and _grounded(item, folded_text)
            for key, item in value.items()
        )
    return False


def _occurs(words: str, folded_text: str) -> bool:
    """`words` in `folded_text`, neither starting nor ending inside a word of it."""
    at = folded_text.find(words)
    while at != -1:
        end = at + len(words)
        before = folded_text[at - 1] if at > 0 else " "
        after = folded_text[end] if end < len(folded_text) else " "
        if not (_word_char(before) and _word_char(words[0])) and not (
            _word_char(after) and _word_char(words[-1])
        ):
            return True
        at = folded_text.find(words, at + 1)
    return False


def _word_char(ch: str) -> bool:
    return ch.isalnum()


#: understanding -> acts -> [i] -> arguments -> [j] -> value: what a value sits inside
_WRAPPING_LEVELS = 6


def validate_understanding(understanding: Understanding, brief: Brief) -> Understanding:
    """`understanding` itself if every part fits `brief`; else `UnderstandingRejected` listing
    every problem. All or nothing: one bad part rejects the whole understanding."""
    # The caps of one value, plus the levels an understanding wraps its values in.
    unfit = json_value_problem(
        understanding.model_dump(mode="python"), max_depth=MAX_JSON_DEPTH + _WRAPPING_LEVELS
    )
    if unfit is not None:  # a string no store can keep, or past the caps: nothing else is read
        raise UnderstandingRejected(
            [Problem(code=codes.UNDERSTANDING_UNFIT_VALUE, path="understanding")]
        )
    problems = list(_problems(understanding, brief))
    if problems:
        raise UnderstandingRejected(problems)
    return understanding


# --- builders -----------------------------------------------------------------------------------
# What an interpreter (or a test) writes a proposal with: each part quotes the user's words.


def act(
    act_id: str,
    operation: str,
    handle: str | None,
    quote: str,
    *,
    corrects: str | None = None,
    cancels: str | None = None,
    **arguments: Any,
) -> ProposedAct:
    """An act on `handle` (None: the card on screen) whose evidence, and every argument's,
    quotes `quote`."""
    return ProposedAct(
        act_id=act_id,
        operation=operation,
        target=HandleTarget(handle=handle) if handle else CardTarget(),
        arguments=tuple(
            ArgumentValue(name=name, value=value, evidence=Evidence(quote=quote))
            for name, value in arguments.items()
        ),
        evidence=Evidence(quote=quote),
        corrects=corrects,
        cancels=cancels,
    )


def ambiguous_act(
    act_id: str, operation: str, handles: tuple[str, ...], quote: str, **arguments: Any
) -> ProposedAct:
    """An act whose words fit each of `handles` (at least two): the runtime asks which."""
    base = act(act_id, operation, handles[0], quote, **arguments)
    return base.model_copy(update={"target": AmbiguousTarget(handles=handles)})


def question(question_id: str, text: str, *about: str, hypothetical: bool = False) -> Question:
    """A question the user asked, about the cases behind `about`'s handles."""
    return Question(question_id=question_id, text=text, about=about, hypothetical=hypothetical)


def constraint(kind: ConstraintKind | str, quote: str) -> Constraint:
    """A limit the user put on this turn's effects, quoting their words."""
    return Constraint(kind=ConstraintKind(kind), evidence=Evidence(quote=quote))


def named_record(record: str, reference: str, quote: str | None = None) -> NamedReference:
    """The user named a record of kind `record` by `reference`, quoting `quote` (the
    reference itself unless given)."""
    return NamedReference(
        record=record, reference=reference, evidence=Evidence(quote=quote or reference)
    )


def understanding_of(
    *parts: ProposedAct | Question | Constraint | CardAnswerProposal | NamedReference,
) -> Understanding:
    """An understanding of `parts`, each in its list in the order given."""
    return Understanding(
        acts=tuple(p for p in parts if isinstance(p, ProposedAct)),
        questions=tuple(p for p in parts if isinstance(p, Question)),
        constraints=tuple(p for p in parts if isinstance(p, Constraint)),
        card_answers=tuple(p for p in parts if isinstance(p, CardAnswerProposal)),
        lookups=tuple(p for p in parts if isinstance(p, NamedReference)),
    )
