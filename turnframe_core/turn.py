"""Turns: what a user sends (`TurnInput`) and what the assistant returns (`AssistantTurn`).

An `AssistantTurn` is ONE ordered, immutable list of blocks plus a `replay_token` that joins it to
its audit record. No other field carries user-visible content. It is stored as canonical JSON and
reloads byte-identical. Its `schema_version` ("MAJOR.MINOR") says which shape it has: a reader
refuses another major with `UnsupportedSchemaVersion` and reads a newer minor from storage, keeping
what that minor added opaque (docs/decisions/0007-turn-schema-version.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum
from itertools import islice
from typing import Annotated, Any, Final

from pydantic import (
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from turnframe_core import codes
from turnframe_core._input import InputModel, InvalidTurnInput, LocaleTag
from turnframe_core.blocks import (
    STORED_CONTEXT,
    BlockKind,
    ResponseBlock,
    UnknownBlock,
    block_rank,
    mislabelled_prose,
)
from turnframe_core.canonical import canonical_json
from turnframe_core.cases import CaseRef
from turnframe_core.derive import derive_replay_token
from turnframe_core.errors import TurnframeError
from turnframe_core.ids import (
    AccountId,
    ConversationId,
    InteractionId,
    OptionId,
    ReplayToken,
    TurnId,
)
from turnframe_core.interactions import InteractionResponse
from turnframe_core.model import FrozenModel, Millis, NonEmptyStr, Whole
from turnframe_core.understanding import ExpectationKind

__all__ = [
    "SERVER_TURN_ORIGIN",
    "TURN_SCHEMA_VERSION",
    "UNVERSIONED_SCHEMA_VERSION",
    "AssistantTurn",
    "AttachmentRef",
    "Expectation",
    "ExpectationKind",
    "InvalidTurnInput",
    "MAX_ATTACHMENTS",
    "MAX_TEXT_CHARS",
    "Offer",
    "TerminalStatus",
    "TurnInput",
    "TurnStatus",
    "UnsupportedSchemaVersion",
]

#: The caps on what one user turn may carry.
MAX_TEXT_CHARS: Final = 20_000
MAX_ATTACHMENTS: Final = 20
MAX_ORIGIN_REF_CHARS: Final = 500
#: The origin_ref prefix of a turn the server writes on its own (a follow-up); a user's input
#: never carries it.
SERVER_TURN_ORIGIN: Final = "turnframe.server:"

#: An attachment's id: 1-200 printable ASCII characters, no space.
AttachmentId = Annotated[str, StringConstraints(pattern=r"^[!-~]{1,200}$")]
#: A media type without parameters (RFC 6838 names): `image/png`, `application/vnd.x+json`.
MediaType = Annotated[
    str,
    StringConstraints(
        max_length=255,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*$",
    ),
]
#: A file's name as the user's device gave it: no path separator, no control character.
FileName = Annotated[
    str, StringConstraints(min_length=1, max_length=255, pattern=r"^[^/\\\x00-\x1f\x7f]+$")
]


class AttachmentRef(InputModel):
    """A file the user sent, by reference (the turn never carries its bytes)."""

    attachment_id: AttachmentId
    media_type: MediaType
    filename: FileName | None = None
    size_bytes: Whole | None = None


class _AttachmentBefore(FrozenModel):
    attachment_id: NonEmptyStr
    media_type: NonEmptyStr
    filename: str | None = None
    size_bytes: int | None = Field(default=None, ge=0)


class _AnswerBefore(FrozenModel):
    interaction_id: InteractionId
    option_id: OptionId
    expected_case_revision: int = Field(ge=0)
    freeform_input: str | None = Field(default=None, max_length=10_000)


class _TurnInputBefore(FrozenModel):
    """The rules a user's turn was stored under before input became strict (decision 0008)."""

    account_id: AccountId
    conversation_id: ConversationId
    turn_id: TurnId | None = None
    text: str | None = Field(default=None, max_length=MAX_TEXT_CHARS)
    interaction_response: _AnswerBefore | None = None
    attachments: tuple[_AttachmentBefore, ...] = ()
    origin_ref: str | None = Field(default=None, max_length=500)
    locale: str = Field(default="en", min_length=1, max_length=35)


class TurnInput(InputModel):
    """A user's turn: text and/or a card answer (both together is legal), never anything that
    defines a card's meaning. `turn_id` is the client's idempotency handle; the runtime assigns
    one when it is absent. Every refusal raises `InvalidTurnInput`, built in code or from JSON."""

    account_id: AccountId
    conversation_id: ConversationId
    turn_id: TurnId | None = None
    text: str | None = Field(default=None, max_length=MAX_TEXT_CHARS)
    interaction_response: InteractionResponse | None = None
    attachments: tuple[AttachmentRef, ...] = Field(default=(), max_length=MAX_ATTACHMENTS)
    origin_ref: str | None = Field(default=None, max_length=MAX_ORIGIN_REF_CHARS)
    locale: LocaleTag = "en"

    @classmethod
    def _as_stored(cls, data: dict[str, Any]) -> Any:
        """A user's turn stored before today's input rules (a locale such as `en_US`, more than
        `MAX_ATTACHMENTS` attachments, a looser attachment): read as the rules then in force
        accepted it, value for value, so its records (and their digests) stay as they were."""
        try:
            then = _TurnInputBefore.model_validate(data)
        except ValidationError:
            return None
        answer = then.interaction_response
        kept = cls.model_construct(
            **{name: getattr(then, name) for name in then.model_fields_set if name != "attachments"
               and name != "interaction_response"},
            interaction_response=(
                None if answer is None else InteractionResponse.model_construct(**dict(answer))
            ),
            attachments=tuple(AttachmentRef.model_construct(**dict(a)) for a in then.attachments),
        )  # fmt: skip
        # Value for value, or not at all: anything the earlier rules would have coerced (a
        # revision of `true`, a size of 1.0) is damage, not an earlier turn.
        try:
            same = canonical_json(kept) == canonical_json(data)
        except Exception:  # what the data holds has no canonical form
            return None
        return kept if same else None

    @field_validator("attachments", mode="before")
    @classmethod
    def _at_most(cls, value: Any) -> Any:
        """Too many is refused before any one is judged (refusing each would cost per item)."""
        if isinstance(value, str | bytes | dict) or not isinstance(value, Iterable):
            return value  # not a sequence: the field's own rule refuses it
        if not isinstance(value, list | tuple):  # a generator, a deque…: never read past the cap
            value = list(islice(value, MAX_ATTACHMENTS + 1))
        if len(value) > MAX_ATTACHMENTS:
            raise ValueError(f"at most {MAX_ATTACHMENTS} attachments")
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> TurnInput:
        has_text = self.text is not None and bool(self.text.strip())
        if self.is_server_turn:
            if has_text or self.interaction_response is not None or self.attachments:
                raise InvalidTurnInput("a server turn carries no user text, answer or attachment")
            return self
        if not has_text and self.interaction_response is None and not self.attachments:
            raise InvalidTurnInput("a turn needs text, a card answer or an attachment")
        return self

    @classmethod
    def server_turn(
        cls, account_id: str, conversation_id: str, turn_id: str, cause: str, locale: str
    ) -> TurnInput:
        """The input of a turn the server writes on its own (e.g. the follow-up that tells the
        user what the outside world answered): no user words, only what caused it."""
        return cls(
            account_id=account_id,
            conversation_id=conversation_id,
            turn_id=turn_id,
            origin_ref=f"{SERVER_TURN_ORIGIN}{cause}",
            locale=locale,
        )

    @property
    def is_server_turn(self) -> bool:
        """Written by the server, not sent by a user: `handle_turn` refuses it."""
        return self.origin_ref is not None and self.origin_ref.startswith(SERVER_TURN_ORIGIN)

    @property
    def is_click_only(self) -> bool:
        """A card answer with no text and no attachment: it needs no model call."""
        has_text = self.text is not None and bool(self.text.strip())
        return self.interaction_response is not None and not has_text and not self.attachments


class TurnStatus(StrEnum):
    STREAMING = "streaming"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"

    @property
    def is_terminal(self) -> bool:
        return self is not TurnStatus.STREAMING


class TerminalStatus(TurnframeError):
    code = codes.TURN_TERMINAL_STATUS


class Expectation(FrozenModel):
    """What this reply asked for; the next turn reads its message as a possible answer."""

    kind: ExpectationKind
    case_ref: CaseRef | None = None
    operation: str | None = None
    missing: tuple[str, ...] = ()


class Offer(FrozenModel):
    """A next step this reply offered (the next turn may take it up)."""

    case_ref: CaseRef | None = None
    operation: NonEmptyStr
    words: str
    arguments: dict[str, Any] = Field(default_factory=dict)


#: The turn shape this version writes. A minor version only adds what an older reader can keep
#: opaque (a block kind, a top-level field); anything else is a new major.
TURN_SCHEMA_VERSION: Final = "1.2"
#: The first version whose prose blocks may carry `moves` (structured narration, decision 0022).
MOVES_SCHEMA_VERSION: Final = "1.2"
#: The version of a turn that has no `schema_version` key: every turn stored before the key
#: existed. Its JSON omits the key, so those stored texts still reload byte for byte.
UNVERSIONED_SCHEMA_VERSION: Final = "1.0"

_VERSION_PATTERN: Final = r"^(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})$"
_READ_MAJOR, _READ_MINOR = (int(part) for part in TURN_SCHEMA_VERSION.split("."))
SchemaVersion = Annotated[str, StringConstraints(pattern=_VERSION_PATTERN)]


def _minor(version: str) -> int:
    """The minor of a version of this major (the model refuses any other)."""
    return int(version.split(".")[1])


class UnsupportedSchemaVersion(TurnframeError):
    """A turn of a major schema version this version cannot read (written by another major)."""

    code = codes.TURN_UNSUPPORTED_SCHEMA_VERSION

    def __init__(self, version: str) -> None:
        super().__init__(
            f"assistant turn schema version {version} cannot be read here "
            f"(this version reads {_READ_MAJOR}.x)"
        )
        self.version = version


class AssistantTurn(FrozenModel):
    """The assistant's turn, exactly as returned, persisted and reloaded.

    Without a `schema_version`, a turn built in code gets `TURN_SCHEMA_VERSION`; JSON or stored
    data without the key predates it and reads as `UNVERSIONED_SCHEMA_VERSION`.
    """

    # Fields a newer minor added are kept (never interpreted) only when read from storage; the
    # version check refuses them everywhere else.
    model_config = ConfigDict(extra="allow")

    schema_version: SchemaVersion = TURN_SCHEMA_VERSION
    turn_id: TurnId
    conversation_id: ConversationId
    account_id: AccountId
    status: TurnStatus
    locale: NonEmptyStr
    blocks: tuple[ResponseBlock, ...]
    replay_token: ReplayToken
    created_at: Millis
    completed_at: Millis | None = None
    expectations: tuple[Expectation, ...] = ()
    offers: tuple[Offer, ...] = ()
    subjects: tuple[CaseRef, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _versioned(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict):
            return data
        stored = bool((info.context or {}).get("turnframe_stored"))
        if "schema_version" not in data:
            legacy = stored or info.mode == "json"
            version = UNVERSIONED_SCHEMA_VERSION if legacy else TURN_SCHEMA_VERSION
            data = {**data, "schema_version": version}
        version = data["schema_version"]
        if not isinstance(version, str) or not re.fullmatch(_VERSION_PATTERN, version):
            return data  # the field's own pattern refuses it
        major, minor = (int(part) for part in version.split("."))
        if major != _READ_MAJOR:
            raise UnsupportedSchemaVersion(version)
        if minor > _READ_MINOR:
            if not stored:
                raise ValueError("a turn of a newer minor schema version is read only from storage")
        elif set(data) - set(cls.model_fields):
            raise ValueError(f"a turn of schema version {version} has fields it does not know")
        return data

    @model_serializer(mode="wrap")
    def _without_unversioned_key(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> Any:
        data = handler(self)
        if info.mode_is_json() and self.schema_version == UNVERSIONED_SCHEMA_VERSION:
            data.pop("schema_version", None)
        return data

    @model_validator(mode="after")
    def _structure(self) -> AssistantTurn:
        if self.checked():
            return self  # this very instance passed already (placed in a bundle, an event)
        if self.replay_token != derive_replay_token(self.turn_id):
            raise ValueError("replay_token is not derived from turn_id")
        if (self.completed_at is None) != (self.status is TurnStatus.STREAMING):
            raise ValueError("completed_at is set exactly when the status is terminal")
        if self.completed_at is not None and self.completed_at < self.created_at:
            raise ValueError("completed_at precedes created_at")
        seen: set[str] = set()
        last_rank = -1
        transitions = 0
        for index, block in enumerate(self.blocks):
            block_id = block.block_id
            if block_id is not None:
                if block_id in seen:
                    raise ValueError(f"blocks[{index}] repeats a block_id")
                seen.add(block_id)
            rank = block_rank(block)
            if rank is None:
                continue
            if rank < last_rank:
                raise ValueError(
                    f"blocks[{index}] ({block.kind}) is out of the documented block order"
                )
            last_rank = rank
            if block.kind == BlockKind.TRANSITION.value:
                transitions += 1
        if transitions > 1:
            raise ValueError("a turn has at most one transition block")
        if _minor(self.schema_version) < _minor(MOVES_SCHEMA_VERSION):
            for index, block in enumerate(self.blocks):
                if getattr(block, "moves", ()):
                    raise ValueError(
                        f"blocks[{index}] ({block.kind}) carries moves, which a turn of schema "
                        f"version {self.schema_version} cannot hold"
                    )
        if self.schema_version != UNVERSIONED_SCHEMA_VERSION:
            for index, block in enumerate(self.blocks):
                if mislabelled_prose(block):
                    raise ValueError(
                        f"blocks[{index}] ({block.kind}) was rendered from server copy but says "
                        "a model wrote it, though no model chose its moves (author: 'server')"
                    )
        self.mark_checked()
        return self

    @classmethod
    def begin(
        cls,
        *,
        turn_id: str,
        conversation_id: str,
        account_id: str,
        locale: str,
        created_at: int,
    ) -> AssistantTurn:
        """An empty turn in status `streaming`."""
        return cls(
            turn_id=turn_id,
            conversation_id=conversation_id,
            account_id=account_id,
            status=TurnStatus.STREAMING,
            locale=locale,
            blocks=(),
            replay_token=derive_replay_token(turn_id),
            created_at=created_at,
        )

    def finish(self, status: TurnStatus, *, at: int, **changes: Any) -> AssistantTurn:
        """This turn moved to a terminal status. A terminal turn never changes again."""
        if self.status.is_terminal:
            raise TerminalStatus(f"turn is already {self.status.value}")
        if not status.is_terminal:
            raise TerminalStatus("finish() needs a terminal status")
        data = self.model_dump(mode="python", round_trip=True)
        data.update(changes, status=status, completed_at=at)
        return AssistantTurn.model_validate(data, context=STORED_CONTEXT if self.has_unknown_blocks
                                            else None)  # fmt: skip

    @property
    def has_unknown_blocks(self) -> bool:
        return any(isinstance(block, UnknownBlock) for block in self.blocks)

    @property
    def block_ids(self) -> tuple[str | None, ...]:
        return tuple(block.block_id for block in self.blocks)

    def to_stored_json(self) -> str:
        """The canonical JSON text the store keeps; reloading it gives this turn byte for byte."""
        return canonical_json(self.model_dump(mode="json"))

    @classmethod
    def from_stored_json(cls, text: str | bytes) -> AssistantTurn:
        """Read a stored turn; unknown block kinds are kept as opaque `UnknownBlock`s, and so are
        the fields of a newer minor version. Another major raises `UnsupportedSchemaVersion`."""
        return cls.model_validate_json(text, context=STORED_CONTEXT)
