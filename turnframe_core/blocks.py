"""Response blocks: the only carriers of user-visible content.

`receipt`, `notice`, `interaction` and `artifact` are server-authored and carry every operational
fact. `answer` and `transition` are the prose slots: a model's draft, or server copy standing in
for one, and their `author` says which (decision 0010); nothing a model sends can set it. Model
output is parsed only into the two prose kinds. A stored block of a kind this version does not know
is read as an opaque `UnknownBlock` and written back unchanged; nothing here ever authors one.

Block order inside a turn is fixed: receipts (in act order), notices, answers (in question order),
the transition, artifacts, then interaction cards, so the text that introduces a card precedes it.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any, Final, Literal
from urllib.parse import urlsplit

from pydantic import (
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from turnframe_core import codes
from turnframe_core.canonical import Digest
from turnframe_core.derive import derive_block_id, derive_receipt_id
from turnframe_core.errors import TurnframeError
from turnframe_core.events import ReceiptSeverity
from turnframe_core.facts import NarratableFact
from turnframe_core.ids import BlockId, EventId, InteractionId, ReceiptId
from turnframe_core.interactions import (
    InteractionKind,
    InteractionOptionView,
    InteractionView,
    ReviewEntry,
)
from turnframe_core.limits import (
    MAX_MODEL_OUTPUT_CHARS,
    json_value_problem,
)
from turnframe_core.model import (
    FrozenModel,
    Millis,
    NonEmptyStr,
    Revision,
    without_unset_additions,
)
from turnframe_core.moves import Move

__all__ = [
    "BLOCK_ORDER",
    "MODEL_KINDS",
    "SERVER_KINDS",
    "STORED_CONTEXT",
    "AnswerBasis",
    "AnswerBlock",
    "AnswerStatus",
    "ArtifactBlock",
    "Author",
    "BlockKind",
    "CopyRef",
    "ForbiddenAuthorship",
    "InteractionBlock",
    "MalformedModelOutput",
    "ModelBlock",
    "NoticeBlock",
    "NoticeSeverity",
    "ReceiptBlock",
    "ResponseBlock",
    "TransitionBlock",
    "UnknownBlock",
    "UnsafeUri",
    "block_rank",
    "parse_model_output",
]


class Author(StrEnum):
    MODEL = "model"
    SERVER = "server"


class BlockKind(StrEnum):
    ANSWER = "answer"
    TRANSITION = "transition"
    RECEIPT = "receipt"
    NOTICE = "notice"
    INTERACTION = "interaction"
    ARTIFACT = "artifact"


MODEL_KINDS: Final = frozenset({BlockKind.ANSWER, BlockKind.TRANSITION})
SERVER_KINDS: Final = frozenset(set(BlockKind) - MODEL_KINDS)
#: The documented block order, by kind.
BLOCK_ORDER: Final[tuple[BlockKind, ...]] = (
    BlockKind.RECEIPT,
    BlockKind.NOTICE,
    BlockKind.ANSWER,
    BlockKind.TRANSITION,
    BlockKind.ARTIFACT,
    BlockKind.INTERACTION,
)
#: Validation context under which stored data is read (admits `UnknownBlock`).
STORED_CONTEXT: Final = {"turnframe_stored": True}


class NoticeSeverity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class AnswerStatus(StrEnum):
    ANSWERED = "answered"
    CLARIFICATION_REQUESTED = "clarification_requested"
    UNSUPPORTED = "unsupported"
    SOURCE_UNAVAILABLE = "source_unavailable"
    WITHHELD = "withheld"
    NOT_WRITTEN = "not_written"


class AnswerBasis(StrEnum):
    CURRENT_COMMITTED_STATE = "current_committed_state"
    COMMITTED_STATE_AFTER_TURN = "committed_state_after_turn"
    PROPOSED_STATE = "proposed_state"
    GENERAL_DOMAIN_KNOWLEDGE = "general_domain_knowledge"


class CopyRef(FrozenModel):
    """Which template rendered a server block's text, so replay never re-renders it."""

    template_id: NonEmptyStr
    template_version: NonEmptyStr
    locale: NonEmptyStr
    catalog_digest: Digest


# --- model-authored -----------------------------------------------------------------------------


def _prose_authorship(block: AnswerBlock | TransitionBlock) -> None:
    """Server-written prose names the server copy it was rendered from; moves are what a model
    chose, so only model prose carries them, and prose made of moves names the copy of its first
    move. (The converse, that prose with a `copy_ref` says `server` unless a model chose its
    moves, is a rule of turns from schema 1.1 on: a 1.0 turn predates recorded authorship and
    labelled server copy `model`.)"""
    if block.author == "server" and block.copy_ref is None:
        raise ValueError("server-written prose names the copy it was rendered from (copy_ref)")
    if block.moves and block.author != "model":
        raise ValueError("only model prose carries the moves a model chose")
    if block.moves and block.copy_ref is None:
        raise ValueError("prose made of moves names the copy it was rendered from (copy_ref)")


def mislabelled_prose(block: Any) -> bool:
    """Prose rendered from server copy that says a model wrote it, though no model chose its
    moves (only 1.0 turns may hold it)."""
    return (
        isinstance(block, AnswerBlock | TransitionBlock)
        and block.author == "model"
        and block.copy_ref is not None
        and not block.moves
    )


#: The fields prose blocks gained after turns were first stored, with their defaults: left out
#: while unset, so a stored turn serializes, and digests, as it did.
_PROSE_ADDITIONS: Final[dict[str, Any]] = {"moves": ()}


class AnswerBlock(FrozenModel):
    """Prose answering one question: a model's draft (`author` model; with `moves` when the
    model chose moves the server rendered), or server copy standing in for one (`author` server,
    with the `copy_ref` it was rendered from). Either way the slot never carries an operational
    claim its facts do not back."""

    kind: Literal["answer"] = "answer"
    author: Literal["model", "server"] = "model"
    block_id: BlockId
    question_id: str | None = None
    text: NonEmptyStr
    basis: AnswerBasis = AnswerBasis.CURRENT_COMMITTED_STATE
    status: AnswerStatus = AnswerStatus.ANSWERED
    facts_used: tuple[NarratableFact, ...] = ()
    copy_ref: CopyRef | None = None
    #: the moves a model chose, rendered through server copy (structured narration)
    moves: tuple[Move, ...] = ()

    @model_validator(mode="after")
    def _authorship(self) -> AnswerBlock:
        _prose_authorship(self)
        return self

    @model_serializer(mode="wrap")
    def _added_later(self, handler: SerializerFunctionWrapHandler) -> Any:
        return without_unset_additions(handler(self), _PROSE_ADDITIONS)


class TransitionBlock(FrozenModel):
    """The reply's connecting prose: a model's draft (`author` model; with `moves` when the model
    chose moves the server rendered), or server copy standing in for one (`author` server, with
    its `copy_ref`)."""

    kind: Literal["transition"] = "transition"
    author: Literal["model", "server"] = "model"
    block_id: BlockId
    text: NonEmptyStr
    facts_used: tuple[NarratableFact, ...] = ()
    copy_ref: CopyRef | None = None
    #: the moves a model chose, rendered through server copy (structured narration)
    moves: tuple[Move, ...] = ()

    @model_validator(mode="after")
    def _authorship(self) -> TransitionBlock:
        _prose_authorship(self)
        return self

    @model_serializer(mode="wrap")
    def _added_later(self, handler: SerializerFunctionWrapHandler) -> Any:
        return without_unset_additions(handler(self), _PROSE_ADDITIONS)


ModelBlock = AnswerBlock | TransitionBlock

# --- server-authored ----------------------------------------------------------------------------


class ReceiptBlock(FrozenModel):
    """The canonical status of something that happened: it cites committed events and its id is
    derived from them, so no receipt exists without events and none can be forged."""

    kind: Literal["receipt"] = "receipt"
    author: Literal["server"] = "server"
    block_id: BlockId
    receipt_id: ReceiptId
    event_ids: tuple[EventId, ...] = Field(min_length=1)
    status_code: NonEmptyStr
    severity: ReceiptSeverity = ReceiptSeverity.SUCCESS
    title: NonEmptyStr
    body: str = ""
    copy_ref: CopyRef

    @model_validator(mode="after")
    def _id_is_derived(self) -> ReceiptBlock:
        if self.receipt_id != derive_receipt_id(self.status_code, self.event_ids):
            raise ValueError("receipt_id is not derived from status_code and event_ids")
        return self


class NoticeBlock(FrozenModel):
    """Something not done, refused or pending, under a stable code."""

    kind: Literal["notice"] = "notice"
    author: Literal["server"] = "server"
    block_id: BlockId
    code: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")]
    severity: NoticeSeverity = NoticeSeverity.INFO
    text: NonEmptyStr
    copy_ref: CopyRef


class InteractionBlock(FrozenModel):
    """A persisted card as the client sees it: options carry ids and labels, never actions."""

    kind: Literal["interaction"] = "interaction"
    author: Literal["server"] = "server"
    block_id: BlockId
    interaction_id: InteractionId
    interaction_kind: InteractionKind
    title: NonEmptyStr
    body: str | None = None
    options: tuple[InteractionOptionView, ...] = Field(min_length=1)
    review_entries: tuple[ReviewEntry, ...] = ()
    freeform_prompt: str | None = None
    blocking: bool
    case_revision: Revision
    expires_at: Millis | None = None

    @classmethod
    def from_view(cls, block_id: str, view: InteractionView) -> InteractionBlock:
        return cls(block_id=block_id, **view.model_dump())


_SAFE_SCHEMES: Final = frozenset({"https", "artifact"})


class UnsafeUri(TurnframeError):
    code = codes.BLOCK_INVALID


class ArtifactBlock(FrozenModel):
    """A document or file the server produced. `uri_ref` is a controlled reference: `https:` or
    the server's own `artifact:` scheme; script, file and inline-HTML references are refused."""

    kind: Literal["artifact"] = "artifact"
    author: Literal["server"] = "server"
    block_id: BlockId
    artifact_id: NonEmptyStr
    media_type: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.+-]*/[a-z0-9][a-z0-9.+-]*$")]
    name: NonEmptyStr
    uri_ref: NonEmptyStr

    @field_validator("uri_ref")
    @classmethod
    def _controlled(cls, value: str) -> str:
        if any(ch.isspace() or ord(ch) < 32 for ch in value):
            raise ValueError("uri_ref may not contain whitespace or control characters")
        scheme = urlsplit(value).scheme.lower()
        if scheme not in _SAFE_SCHEMES:
            raise ValueError("uri_ref must use the https: or artifact: scheme")
        return value


# --- unknown (forward compatibility) ------------------------------------------------------------


class UnknownBlock(FrozenModel):
    """A stored block of a kind this version does not know. Read-only: it exists only when stored
    data is read (validation context `STORED_CONTEXT`) and serializes back to exactly what was
    stored. Clients render it as opaque."""

    kind: NonEmptyStr
    block_id: str | None = None
    raw: dict[str, Any]

    @model_validator(mode="before")
    @classmethod
    def _only_from_storage(cls, data: Any, info: ValidationInfo) -> Any:
        context = info.context or {}
        if not context.get("turnframe_stored"):
            raise ValueError("unknown block kinds are only read from storage, never authored")
        if not isinstance(data, dict):
            raise ValueError("a stored block is a JSON object")
        if "raw" in data and set(data) <= {"kind", "block_id", "raw"}:
            data = data["raw"]
        kind = data.get("kind")
        if not isinstance(kind, str) or not kind or kind in set(BlockKind):
            raise ValueError("an unknown block has a kind this version does not know")
        block_id = data.get("block_id")
        return {"kind": kind, "block_id": block_id if isinstance(block_id, str) else None,
                "raw": data}  # fmt: skip

    @model_serializer(mode="plain")
    def _as_stored(self) -> dict[str, Any]:
        return self.raw


_KNOWN_KINDS: Final = frozenset(k.value for k in BlockKind)


def _block_tag(value: Any) -> str:
    if isinstance(value, UnknownBlock):
        return "unknown"
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return kind if isinstance(kind, str) and kind in _KNOWN_KINDS else "unknown"


ResponseBlock = Annotated[
    Annotated[AnswerBlock, Tag("answer")]
    | Annotated[TransitionBlock, Tag("transition")]
    | Annotated[ReceiptBlock, Tag("receipt")]
    | Annotated[NoticeBlock, Tag("notice")]
    | Annotated[InteractionBlock, Tag("interaction")]
    | Annotated[ArtifactBlock, Tag("artifact")]
    | Annotated[UnknownBlock, Tag("unknown")],
    Discriminator(_block_tag),
]


def block_rank(block: Any) -> int | None:
    """Position of a block's kind in the documented order; None for unknown blocks."""
    kind = getattr(block, "kind", None)
    if isinstance(block, UnknownBlock) or kind not in _KNOWN_KINDS:
        return None
    return BLOCK_ORDER.index(BlockKind(kind))


# --- model output parsing -----------------------------------------------------------------------


class ForbiddenAuthorship(TurnframeError):
    """Model output tried to author a kind only the server may author (or an unknown kind)."""

    code = codes.AUTHORSHIP_FORBIDDEN_KIND

    def __init__(self, kind: str, index: int) -> None:
        shown = kind if len(kind) <= 40 else kind[:40] + "…"
        super().__init__(f"model output item {index} has kind {shown!r}; a model may author only "
                         "'answer' and 'transition' blocks")  # fmt: skip
        self.kind = kind
        self.index = index


class MalformedModelOutput(TurnframeError):
    code = codes.AUTHORSHIP_MALFORMED_OUTPUT


#: The length of one model-written text (the JSON a model sends is capped by `limits`).
MAX_PROSE_CHARS: Final = 20_000


class _AnswerDraft(FrozenModel):
    kind: Literal["answer"]
    question_id: str | None = None
    text: NonEmptyStr = Field(max_length=MAX_PROSE_CHARS)
    basis: AnswerBasis = AnswerBasis.CURRENT_COMMITTED_STATE
    status: AnswerStatus = AnswerStatus.ANSWERED
    facts_used: tuple[NarratableFact, ...] = ()


class _TransitionDraft(FrozenModel):
    kind: Literal["transition"]
    text: NonEmptyStr = Field(max_length=MAX_PROSE_CHARS)
    facts_used: tuple[NarratableFact, ...] = ()


def parse_model_output(
    raw: str | list[Any] | dict[str, Any], *, turn_id: str, account_id: str
) -> tuple[ModelBlock, ...]:
    """Parse what a model wrote into answer/transition blocks, or raise.

    Accepts one draft object or a list of them (or their JSON text). Drafts carry no `block_id`
    and no `author`: the server derives ids and authorship. Any other kind raises
    `ForbiddenAuthorship` naming it; anything else malformed raises `MalformedModelOutput`.
    Error messages name positions and kinds, never the model's text.
    """
    data: Any = raw
    if isinstance(raw, str):
        if len(raw) > MAX_MODEL_OUTPUT_CHARS:
            raise MalformedModelOutput("model output is too long")
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            raise MalformedModelOutput("model output is not JSON within the depth cap") from None
    problem = json_value_problem(data)
    if problem is not None:
        raise MalformedModelOutput(f"model output {problem}")
    items = data if isinstance(data, list) else [data]
    blocks: list[ModelBlock] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("kind"), str):
            raise MalformedModelOutput(f"model output item {index} is not a block with a kind")
        kind = item["kind"]
        if kind not in (BlockKind.ANSWER.value, BlockKind.TRANSITION.value):
            raise ForbiddenAuthorship(kind, index)
        try:
            if kind == BlockKind.ANSWER.value:
                draft = _AnswerDraft.model_validate(item)
                slot = f"answer:{draft.question_id or index}"
                blocks.append(
                    AnswerBlock(
                        block_id=derive_block_id(account_id, turn_id, slot),
                        question_id=draft.question_id,
                        text=draft.text,
                        basis=draft.basis,
                        status=draft.status,
                        facts_used=draft.facts_used,
                    )
                )
            else:
                tdraft = _TransitionDraft.model_validate(item)
                blocks.append(
                    TransitionBlock(
                        block_id=derive_block_id(account_id, turn_id, f"transition:{index}"),
                        text=tdraft.text,
                        facts_used=tdraft.facts_used,
                    )
                )
        except ValidationError as exc:
            fields = sorted({".".join(str(p) for p in e["loc"]) for e in exc.errors()})
            raise MalformedModelOutput(
                f"model output item {index} ({kind}) is invalid at: {', '.join(fields)}"
            ) from None
    return tuple(blocks)
