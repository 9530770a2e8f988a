"""Export of stored turns: the history a model is given (OpenAI chat and Responses, Anthropic
messages) and the Vis message envelope and streaming events, with Vis import (docs/export.md).

Authorship survives every shape. Model-written prose is assistant text; of prose rendered from
moves a model chose, only the moves are. What the server wrote (receipts, notices, cards,
artifacts, server copy standing in for prose or rendering a model's moves, blocks of unknown
kinds) reaches a model as the result of a tool call, `SERVER_RECORD_TOOL`, never as assistant
text a model could later quote as its own. Every block is judged before it is emitted: a block that
could not have come from the runtime (a receipt whose id is not derived from its events, a
server kind claiming model authorship, prose rendered from copy that claims a model chose it
though no moves were chosen, an unknown kind presented as a known one) raises `ForgedBlock`, and
nothing is returned.

Pure: no I/O, no provider SDK; the shapes are plain dicts and lists of JSON values.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Protocol, TypeAlias, runtime_checkable

from pydantic import TypeAdapter, ValidationError

from turnframe_core import codes
from turnframe_core.blocks import (
    MODEL_KINDS,
    STORED_CONTEXT,
    AnswerBlock,
    ArtifactBlock,
    BlockKind,
    InteractionBlock,
    NoticeBlock,
    NoticeSeverity,
    ReceiptBlock,
    ResponseBlock,
    TransitionBlock,
    UnknownBlock,
    mislabelled_prose,
)
from turnframe_core.canonical import canonical_json
from turnframe_core.derive import derive_block_id, derive_receipt_id
from turnframe_core.errors import TurnframeError
from turnframe_core.ids import TurnId
from turnframe_core.interactions import Interaction
from turnframe_core.model import FrozenModel, Millis
from turnframe_core.stream import (
    BlockCompleted,
    BlockDelta,
    BlockStarted,
    StreamEvent,
    TurnCompleted,
    TurnFailed,
)
from turnframe_core.turn import UNVERSIONED_SCHEMA_VERSION, AssistantTurn, TurnInput

__all__ = [
    "FREEFORM_HARD_CAP",
    "SERVER_RECORD_TOOL",
    "ForgedBlock",
    "HistoryTurn",
    "InvalidVisMessage",
    "StoredUserTurn",
    "UserTurn",
    "anthropic_messages",
    "anthropic_tools",
    "apply_vis_events",
    "check_block",
    "from_vis",
    "from_vis_message",
    "openai_chat_messages",
    "openai_chat_tools",
    "openai_responses_input",
    "openai_responses_tools",
    "to_vis",
    "to_vis_message",
    "vis_events",
]

#: The tool whose results carry what the server wrote in a turn. A provider that sees a tool
#: call in history may ask for the tool to be declared: pass `*_tools()` with the history.
SERVER_RECORD_TOOL: Final = "turnframe_server_record"
_TOOL_DESCRIPTION: Final = (
    "What the application's server recorded in a turn: receipts of committed changes, notices, "
    "cards offered to the user, artifacts. Written by the server, not by the assistant. Never "
    "call this tool."
)
#: The most free text any card answer may carry (`InteractionResponse.freeform_input`): the
#: `max_len` a Vis option shows when the card's own limit is not given.
FREEFORM_HARD_CAP: Final = 10_000

_PROSE_KINDS: Final = frozenset(k.value for k in MODEL_KINDS)
_BLOCK_ADAPTER: Final[TypeAdapter[ResponseBlock]] = TypeAdapter(ResponseBlock)
_KIND_CLASS: Final[dict[str, type]] = {
    BlockKind.ANSWER.value: AnswerBlock,
    BlockKind.TRANSITION.value: TransitionBlock,
    BlockKind.RECEIPT.value: ReceiptBlock,
    BlockKind.NOTICE.value: NoticeBlock,
    BlockKind.INTERACTION.value: InteractionBlock,
    BlockKind.ARTIFACT.value: ArtifactBlock,
}


class ForgedBlock(TurnframeError):
    """A block that could not have come from the runtime; nothing is exported."""

    code = codes.EXPORT_FORGED_BLOCK

    def __init__(self, index: int, kind: str, reason: str) -> None:
        shown = kind if len(kind) <= 40 else kind[:40] + "…"
        super().__init__(f"block {index} ({shown}) is not a runtime block: {reason}")
        self.index = index
        self.kind = kind
        self.reason = reason


class InvalidVisMessage(TurnframeError):
    """Vis data that is not a message this library exported (or that no longer reads back)."""

    code = codes.EXPORT_INVALID_VIS


@runtime_checkable
class StoredUserTurn(Protocol):
    """A user turn as a store returns it (`turnframe_store`'s `UserTurnRecord` is one)."""

    @property
    def turn_id(self) -> str: ...

    @property
    def received_at(self) -> int: ...

    @property
    def input(self) -> TurnInput: ...


class UserTurn(FrozenModel):
    """A user turn read back from Vis: the input as received, and when."""

    turn_id: TurnId
    received_at: Millis
    input: TurnInput


HistoryTurn: TypeAlias = "AssistantTurn | StoredUserTurn"


# --- judging blocks ------------------------------------------------------------------------------


def check_block(block: Any, index: int = 0, *, schema_version: str | None = None) -> None:
    """Raise `ForgedBlock` unless `block` is a block the runtime could have written.

    `schema_version`: the turn's; a 1.0 turn may hold server copy labelled `model` (it predates
    recorded authorship), a later one may not.
    """
    kind = getattr(block, "kind", None)
    shown = kind if isinstance(kind, str) else type(block).__name__
    if isinstance(block, UnknownBlock):
        raw_kind = block.raw.get("kind") if isinstance(block.raw, dict) else None
        if kind in _KIND_CLASS or raw_kind != kind:
            raise ForgedBlock(index, shown, "an unknown block presented as a known kind")
        return
    expected = _KIND_CLASS.get(kind) if isinstance(kind, str) else None
    if expected is None or type(block) is not expected:
        raise ForgedBlock(index, shown, "its kind is not the kind of its type")
    author = getattr(block, "author", None)
    if kind not in _PROSE_KINDS and author != "server":
        raise ForgedBlock(index, shown, "a server kind claims another author")
    if isinstance(block, ReceiptBlock) and (
        not block.event_ids
        or block.receipt_id != derive_receipt_id(block.status_code, block.event_ids)
    ):
        raise ForgedBlock(index, shown, "the receipt id is not derived from its events")
    if (
        isinstance(block, AnswerBlock | TransitionBlock)
        and mislabelled_prose(block)
        and schema_version != UNVERSIONED_SCHEMA_VERSION
    ):
        raise ForgedBlock(index, shown, "prose rendered from copy claims a model chose it")
    try:
        again = _BLOCK_ADAPTER.validate_python(_dump(block))
    except (ValidationError, TurnframeError, ValueError):
        raise ForgedBlock(index, shown, "its fields break the block's rules") from None
    if again != block:
        raise ForgedBlock(index, shown, "its fields do not read back as themselves")


def _dump(block: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = block.model_dump(mode="json")
    return dumped


def _checked(turn: AssistantTurn) -> AssistantTurn:
    if not isinstance(turn, AssistantTurn):
        raise TypeError("an assistant turn is an AssistantTurn")
    for index, block in enumerate(turn.blocks):
        check_block(block, index, schema_version=turn.schema_version)
    return turn


def _free_prose(block: Any) -> bool:
    """Prose whose words a model wrote: the only words a model may see as its own."""
    return (
        isinstance(block, AnswerBlock | TransitionBlock)
        and block.author == "model"
        and block.copy_ref is None
        and not block.moves
    )


def _model_said(block: Any) -> str | None:
    """What a model wrote of a block, as assistant content: free prose's text; for prose the
    server rendered from moves a model chose, those moves as the draft the model wrote (their
    words are server copy and reach a model in the server record); else None."""
    if _free_prose(block):
        text: str = block.text
        return text
    if not isinstance(block, AnswerBlock | TransitionBlock) or block.author != "model":
        return None
    if not block.moves:
        return None  # server copy labelled model (1.0 turns only)
    draft: dict[str, Any] = {
        "kind": block.kind,
        "moves": [m.model_dump(mode="json", exclude_defaults=True) for m in block.moves],
    }
    if isinstance(block, AnswerBlock) and block.question_id is not None:
        draft["question_id"] = block.question_id
    return canonical_json(draft)


# --- model history ------------------------------------------------------------------------------


def _call_id(turn_id: str) -> str:
    """A tool-call id every provider accepts (`[A-Za-z0-9_-]`), derived from the turn."""
    return "tfrec_" + hashlib.sha256(turn_id.encode("utf-8")).hexdigest()[:24]


def _server_record(turn: AssistantTurn) -> str | None:
    """The canonical JSON of what the server wrote in the turn, or None when it wrote nothing."""
    blocks = [b.model_dump(mode="json") for b in turn.blocks if not _free_prose(b)]
    if not blocks and turn.status.value == "completed":
        return None
    return canonical_json({"turn_id": turn.turn_id, "status": turn.status.value, "blocks": blocks})


def _prose(turn: AssistantTurn) -> list[str]:
    return [said for said in map(_model_said, turn.blocks) if said is not None]


def _user_parts(record: StoredUserTurn) -> list[str]:
    """What the user sent, as texts: their words, then (as JSON) a card answer and attachments.
    A turn the server wrote on its own sends nothing."""
    given = record.input
    if given.is_server_turn:
        return []
    parts: list[str] = []
    if given.text is not None and given.text.strip():
        parts.append(given.text)
    extra: dict[str, Any] = {}
    if given.interaction_response is not None:
        extra["interaction_response"] = given.interaction_response.model_dump(
            mode="json", exclude_none=True
        )
    if given.attachments:
        extra["attachments"] = [
            a.model_dump(mode="json", exclude_none=True) for a in given.attachments
        ]
    if extra:
        parts.append(canonical_json({"turnframe_user_input": extra}))
    return parts


def _entries(history: Iterable[Any]) -> list[AssistantTurn | StoredUserTurn]:
    listed: list[AssistantTurn | StoredUserTurn] = []
    for entry in history:
        if isinstance(entry, AssistantTurn):
            listed.append(_checked(entry))
        elif isinstance(entry, StoredUserTurn) and isinstance(entry.input, TurnInput):
            listed.append(entry)
        else:
            raise TypeError("history holds assistant turns and stored user turns only")
    return listed


def openai_chat_messages(history: Iterable[HistoryTurn]) -> list[dict[str, Any]]:
    """The OpenAI Chat Completions `messages` for a conversation's turns, oldest first.

    A user turn is a `user` message. An assistant turn is an `assistant` message calling
    `SERVER_RECORD_TOOL`, the `tool` message answering it with what the server wrote, then an
    `assistant` message with the model's own prose (when there is any).
    """
    messages: list[dict[str, Any]] = []
    for entry in _entries(history):
        if not isinstance(entry, AssistantTurn):
            parts = _user_parts(entry)
            if parts:
                messages.append({"role": "user", "content": "\n\n".join(parts)})
            continue
        record = _server_record(entry)
        if record is not None:
            call_id = _call_id(entry.turn_id)
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": SERVER_RECORD_TOOL, "arguments": "{}"},
                        }
                    ],
                }
            )
            messages.append({"role": "tool", "tool_call_id": call_id, "content": record})
        prose = _prose(entry)
        if prose:
            messages.append({"role": "assistant", "content": "\n\n".join(prose)})
    return messages


def openai_responses_input(history: Iterable[HistoryTurn]) -> list[dict[str, Any]]:
    """The OpenAI Responses API `input` items for a conversation's turns, oldest first: user
    messages, a `function_call` / `function_call_output` pair carrying what the server wrote,
    and assistant messages with the model's own prose."""
    items: list[dict[str, Any]] = []
    for entry in _entries(history):
        if not isinstance(entry, AssistantTurn):
            parts = _user_parts(entry)
            if parts:
                items.append(
                    {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": p} for p in parts],
                    }
                )
            continue
        record = _server_record(entry)
        if record is not None:
            call_id = _call_id(entry.turn_id)
            items.append(
                {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": SERVER_RECORD_TOOL,
                    "arguments": "{}",
                }
            )
            items.append({"type": "function_call_output", "call_id": call_id, "output": record})
        prose = _prose(entry)
        if prose:
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": p} for p in prose],
                }
            )
    return items


def anthropic_messages(history: Iterable[HistoryTurn]) -> list[dict[str, Any]]:
    """The Anthropic Messages API `messages` for a conversation's turns, oldest first.

    What the server wrote is a `tool_result` (in a `user` message) answering the assistant's
    `tool_use` of `SERVER_RECORD_TOOL`; the model's prose is `text` in an `assistant` message.
    Consecutive messages of one role are merged, so roles alternate.
    """
    messages: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})

    for entry in _entries(history):
        if not isinstance(entry, AssistantTurn):
            parts = _user_parts(entry)
            if parts:
                add("user", [{"type": "text", "text": p} for p in parts])
            continue
        record = _server_record(entry)
        if record is not None:
            call_id = _call_id(entry.turn_id)
            add(
                "assistant",
                [{"type": "tool_use", "id": call_id, "name": SERVER_RECORD_TOOL, "input": {}}],
            )
            add(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": call_id,
                        "content": [{"type": "text", "text": record}],
                    }
                ],
            )
        prose = _prose(entry)
        if prose:
            add("assistant", [{"type": "text", "text": p} for p in prose])
    return messages


_NO_ARGUMENTS: Final = {"type": "object", "properties": {}, "additionalProperties": False}


def openai_chat_tools() -> list[dict[str, Any]]:
    """The declaration of `SERVER_RECORD_TOOL` for Chat Completions `tools`."""
    return [
        {
            "type": "function",
            "function": {
                "name": SERVER_RECORD_TOOL,
                "description": _TOOL_DESCRIPTION,
                "parameters": dict(_NO_ARGUMENTS),
            },
        }
    ]


def openai_responses_tools() -> list[dict[str, Any]]:
    """The declaration of `SERVER_RECORD_TOOL` for Responses API `tools`."""
    return [
        {
            "type": "function",
            "name": SERVER_RECORD_TOOL,
            "description": _TOOL_DESCRIPTION,
            "parameters": dict(_NO_ARGUMENTS),
        }
    ]


def anthropic_tools() -> list[dict[str, Any]]:
    """The declaration of `SERVER_RECORD_TOOL` for the Messages API `tools`."""
    return [
        {
            "name": SERVER_RECORD_TOOL,
            "description": _TOOL_DESCRIPTION,
            "input_schema": dict(_NO_ARGUMENTS),
        }
    ]


# --- Vis: blocks ------------------------------------------------------------------------------

#: Fields of a block that a Vis block carries under its own names; the rest go to `metadata`.
_VIS_FIELDS: Final[dict[str, dict[str, str]]] = {
    "answer": {"text": "markdown"},
    "transition": {"text": "markdown"},
    "receipt": {"status_code": "code", "title": "message"},
    "notice": {"code": "code", "text": "message"},
    "artifact": {"artifact_id": "attachment_id", "name": "name", "media_type": "media_type"},
}
_INTERACTION_FIELDS: Final = (
    "interaction_id",
    "interaction_kind",
    "title",
    "body",
    "options",
    "review_entries",
    "freeform_prompt",
    "blocking",
    "case_revision",
    "expires_at",
)

Limits: TypeAlias = Mapping[tuple[str, str], int]


def _vis_type(data: Mapping[str, Any]) -> str:
    kind = str(data["kind"])
    if kind in _PROSE_KINDS:
        return "prose"
    if kind == "receipt":
        return "notice"
    if kind == "notice":
        return "error" if data.get("severity") == NoticeSeverity.ERROR.value else "notice"
    if kind == "artifact":
        return "attachment"
    return kind  # interaction: a type Vis receivers preserve as it is


def _vis_block(data: dict[str, Any], status: str, limits: Limits) -> dict[str, Any]:
    """One block's Vis form from its JSON dump."""
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in _KIND_CLASS:
        raw = dict(data)
        block_id = raw.get("block_id")
        return {
            "id": block_id if isinstance(block_id, str) else "",
            "type": str(kind),
            "status": status,
            "metadata": {"kind": str(kind), "unknown": True, "raw": raw},
        }
    out: dict[str, Any] = {"id": data["block_id"], "type": _vis_type(data), "status": status}
    metadata: dict[str, Any] = {}
    if kind == "interaction":
        for name in _INTERACTION_FIELDS:
            if name == "options":
                out["options"] = [
                    _vis_option(data["interaction_id"], o, limits) for o in data["options"]
                ]
            elif name in data:
                out[name] = data[name]
        metadata = {k: v for k, v in data.items() if k not in (*_INTERACTION_FIELDS, "block_id")}
    else:
        mapping = _VIS_FIELDS[kind]
        for name, value in data.items():
            if name in mapping:
                out[mapping[name]] = value
            elif name != "block_id":
                metadata[name] = value
        if out["type"] == "error":
            out["retryable"] = False
    out["metadata"] = metadata
    return out


def _vis_option(interaction_id: str, option: Mapping[str, Any], limits: Limits) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": option["option_id"],
        "label": option["label"],
        "style": option["style"],
        "freeform": option["freeform"],
    }
    if option["freeform"] != "forbidden":
        out["max_len"] = limits.get((interaction_id, option["option_id"]), FREEFORM_HARD_CAP)
    return out


def _block_data(vis: Any, index: int) -> dict[str, Any]:
    """A block's JSON dump from its Vis form (the inverse of `_vis_block`)."""
    if not isinstance(vis, dict) or not isinstance(vis.get("metadata"), dict):
        raise InvalidVisMessage(f"content[{index}] is not a block this library exported")
    metadata = vis["metadata"]
    kind = metadata.get("kind")
    if metadata.get("unknown") is True:
        raw = metadata.get("raw")
        if not isinstance(raw, dict) or not isinstance(kind, str):
            raise InvalidVisMessage(f"content[{index}] names no block kind")
        if kind in _KIND_CLASS or raw.get("kind") != kind:
            raise ForgedBlock(index, str(kind), "an unknown block presented as a known kind")
        return raw
    if not isinstance(kind, str) or kind not in _KIND_CLASS:
        raise InvalidVisMessage(f"content[{index}] names no block kind")
    shown = _INTERACTION_FIELDS if kind == "interaction" else tuple(_VIS_FIELDS[kind])
    if any(name in metadata for name in (*shown, "block_id")):
        raise InvalidVisMessage(f"content[{index}]'s metadata overrides a field a client shows")
    data: dict[str, Any] = {"block_id": vis.get("id")}
    if kind == "interaction":
        for name in _INTERACTION_FIELDS:
            if name == "options":
                options = vis.get("options")
                if not isinstance(options, list):
                    raise InvalidVisMessage(f"content[{index}] has no options")
                data["options"] = [_option_data(o, index) for o in options]
            elif name in vis:
                data[name] = vis[name]
    else:
        for name, wire in _VIS_FIELDS[kind].items():
            if wire in vis:
                data[name] = vis[wire]
    data.update(metadata)
    if vis.get("type") != _vis_type(data):
        raise ForgedBlock(index, kind, "its Vis type is not the type of its kind")
    return data


def _option_data(option: Any, index: int) -> dict[str, Any]:
    if not isinstance(option, dict):
        raise InvalidVisMessage(f"content[{index}] has an option that is not an object")
    return {
        "option_id": option.get("id"),
        "label": option.get("label"),
        "style": option.get("style"),
        "freeform": option.get("freeform"),
    }


def _limits(interactions: Iterable[Interaction]) -> dict[tuple[str, str], int]:
    limits: dict[tuple[str, str], int] = {}
    for card in interactions:
        for option in card.payload.options:
            max_len = getattr(option.freeform, "max_len", None)
            if isinstance(max_len, int):
                limits[(card.interaction_id, option.option_id)] = max_len
    return limits


# --- Vis: messages ------------------------------------------------------------------------------

_ENVELOPE_FIELDS: Final = frozenset({"turn_id", "status", "blocks", "created_at", "completed_at"})


def to_vis_message(
    turn: AssistantTurn | StoredUserTurn,
    *,
    provider: str | None = None,
    model: str | None = None,
    interactions: Iterable[Interaction] = (),
) -> dict[str, Any]:
    """One turn as a Vis message envelope (seed 000), every block `completed` with `metadata`.

    `provider` and `model`: what the turn's replay record names (the envelope's `provider` and
    `model`, left out when None). `interactions`: the stored cards, whose options' own free-text
    limits become `max_len` (else `FREEFORM_HARD_CAP`). Raises `ForgedBlock`.
    """
    if not isinstance(turn, AssistantTurn):
        return _user_vis(_entries([turn])[0])  # type: ignore[arg-type]
    _checked(turn)
    return _assistant_vis(turn, provider, model, _limits(interactions))


def _assistant_vis(
    turn: AssistantTurn, provider: str | None, model: str | None, limits: Limits
) -> dict[str, Any]:
    dumped = turn.model_dump(mode="json")
    message: dict[str, Any] = {
        "id": turn.turn_id,
        "role": "assistant",
        "status": turn.status.value,
        "content": [
            _vis_block(b.model_dump(mode="json"), "completed", limits) for b in turn.blocks
        ],
        "created_at": turn.created_at,
    }
    if turn.completed_at is not None:
        message["completed_at"] = turn.completed_at
    if model is not None:
        message["model"] = model
    if provider is not None:
        message["provider"] = provider
    message["metadata"] = {k: v for k, v in dumped.items() if k not in _ENVELOPE_FIELDS}
    return message


def _user_vis(record: StoredUserTurn) -> dict[str, Any]:
    given = record.input
    blocks: list[dict[str, Any]] = []

    def block_id(slot: str) -> str:
        return derive_block_id(given.account_id, record.turn_id, f"user:{slot}")

    if given.text is not None:
        blocks.append(
            {"id": block_id("text"), "type": "prose", "status": "completed", "markdown": given.text}
        )
    if given.interaction_response is not None:
        blocks.append(
            {
                "id": block_id("answer"),
                "type": "interaction_response",
                "status": "completed",
                **given.interaction_response.model_dump(mode="json", exclude_none=True),
            }
        )
    for index, attachment in enumerate(given.attachments):
        shown: dict[str, Any] = {
            "id": block_id(f"attachment:{index}"),
            "type": "attachment",
            "status": "completed",
            "attachment_id": attachment.attachment_id,
            "media_type": attachment.media_type,
        }
        if attachment.filename is not None:
            shown["name"] = attachment.filename
        if attachment.size_bytes is not None:
            shown["metadata"] = {"size_bytes": attachment.size_bytes}
        blocks.append(shown)
    metadata = given.model_dump(
        mode="json", exclude={"text", "interaction_response", "attachments"}, exclude_none=True
    )
    return {
        "id": record.turn_id,
        "role": "system" if given.is_server_turn else "user",
        "status": "completed",
        "content": blocks,
        "created_at": record.received_at,
        "metadata": metadata,
    }


def from_vis_message(message: Any) -> AssistantTurn | UserTurn:
    """The turn a Vis message exported by `to_vis_message` holds; `to_vis_message` of it gives
    the message again, or it is refused, so what a Vis client shows is what is imported.
    Raises `InvalidVisMessage`, or `ForgedBlock` for a block the runtime could not have
    written."""
    turn = _read_vis_message(message)
    if isinstance(turn, AssistantTurn):
        provider, model = message.get("provider"), message.get("model")
        if not isinstance(provider, str | None) or not isinstance(model, str | None):
            raise InvalidVisMessage("the message's provider and model are strings")
        again = _assistant_vis(turn, provider, model, _shown_limits(message))
    else:
        again = _user_vis(turn)
    if _json_text(again) != _json_text(message):
        raise InvalidVisMessage("the message does not export back to itself")
    return turn


def _json_text(value: Any) -> str | None:
    try:
        return canonical_json(value)
    except TurnframeError:
        return None


def _shown_limits(message: dict[str, Any]) -> dict[tuple[str, str], int]:
    """The free-text limits a message's cards show (the stored cards are not at hand on
    import); any limit from 1 to `FREEFORM_HARD_CAP` may be one a card set."""
    limits: dict[tuple[str, str], int] = {}
    for block in message["content"]:
        card, options = block.get("interaction_id"), block.get("options")
        if block.get("type") != "interaction" or not isinstance(options, list):
            continue
        for option in options:
            max_len = option.get("max_len") if isinstance(option, dict) else None
            option_id = option.get("id") if isinstance(option, dict) else None
            if (
                isinstance(card, str)
                and isinstance(option_id, str)
                and type(max_len) is int
                and 1 <= max_len <= FREEFORM_HARD_CAP
            ):
                limits[(card, option_id)] = max_len
    return limits


def _read_vis_message(message: Any) -> AssistantTurn | UserTurn:
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        raise InvalidVisMessage("a Vis message is an object with a content array")
    metadata = message.get("metadata")
    if not isinstance(metadata, dict):
        raise InvalidVisMessage("the message carries no metadata of this library")
    for index, block in enumerate(message["content"]):
        if not isinstance(block, dict) or block.get("status") != "completed":
            raise InvalidVisMessage(f"content[{index}] is not a completed block")
    role = message.get("role")
    if role in ("user", "system"):
        return _user_from_vis(message, metadata)
    if role != "assistant":
        raise InvalidVisMessage("the message's role is not one this library exports")
    blocks = [_block_data(b, i) for i, b in enumerate(message["content"])]
    for index, data in enumerate(blocks):
        kind = data.get("kind")
        if kind in _KIND_CLASS and kind not in _PROSE_KINDS and data.get("author") != "server":
            raise ForgedBlock(index, str(kind), "a server kind claims another author")
    data = {
        **metadata,
        "turn_id": message.get("id"),
        "status": message.get("status"),
        "blocks": blocks,
        "created_at": message.get("created_at"),
    }
    if "completed_at" in message:
        data["completed_at"] = message["completed_at"]
    try:
        turn = AssistantTurn.model_validate(data, context=STORED_CONTEXT)
    except ValidationError as exc:
        forged = _forged_receipt(blocks)
        if forged is not None:
            raise forged from None
        fields = sorted({".".join(str(p) for p in e["loc"]) for e in exc.errors()})[:5]
        raise InvalidVisMessage(f"the message does not read back at: {', '.join(fields)}") from None
    return _checked(turn)


def _forged_receipt(blocks: Sequence[dict[str, Any]]) -> ForgedBlock | None:
    for index, data in enumerate(blocks):
        if data.get("kind") != "receipt":
            continue
        ids, code, rid = data.get("event_ids"), data.get("status_code"), data.get("receipt_id")
        if not isinstance(ids, list) or not ids or not isinstance(code, str):
            return ForgedBlock(index, "receipt", "a receipt cites no events")
        if rid != derive_receipt_id(code, [str(i) for i in ids]):
            return ForgedBlock(index, "receipt", "the receipt id is not derived from its events")
    return None


def _user_from_vis(message: dict[str, Any], metadata: dict[str, Any]) -> UserTurn:
    data: dict[str, Any] = dict(metadata)
    attachments: list[dict[str, Any]] = []
    for index, block in enumerate(message["content"]):
        kind = block.get("type")
        if kind == "prose" and "text" not in data:
            data["text"] = block.get("markdown")
        elif kind == "interaction_response" and "interaction_response" not in data:
            data["interaction_response"] = {
                k: v for k, v in block.items() if k not in ("id", "type", "status")
            }
        elif kind == "attachment":
            shown = {
                "attachment_id": block.get("attachment_id"),
                "media_type": block.get("media_type"),
            }
            if "name" in block:
                shown["filename"] = block["name"]
            extra = block.get("metadata")
            if isinstance(extra, dict) and "size_bytes" in extra:
                shown["size_bytes"] = extra["size_bytes"]
            attachments.append(shown)
        else:
            raise InvalidVisMessage(f"content[{index}] is not a block a user turn holds")
    if attachments:
        data["attachments"] = attachments
    try:
        user = UserTurn(
            turn_id=message.get("id"),
            received_at=message.get("created_at"),
            input=TurnInput.model_validate(data),
        )
    except (ValidationError, TurnframeError):
        raise InvalidVisMessage("the user turn does not read back") from None
    if (message.get("role") == "system") != user.input.is_server_turn:
        raise InvalidVisMessage("only a turn the server wrote is a system message")
    return user


def to_vis(
    history: Iterable[HistoryTurn],
    *,
    llm: Mapping[str, tuple[str, str]] | None = None,
    interactions: Iterable[Interaction] = (),
) -> list[dict[str, Any]]:
    """A conversation's turns as Vis messages, oldest first. `llm` maps an assistant turn's id
    to the (provider, model) of its replay record."""
    cards = tuple(interactions)
    messages: list[dict[str, Any]] = []
    for entry in _entries(history):
        provider, model = (llm or {}).get(entry.turn_id, (None, None))
        messages.append(to_vis_message(entry, provider=provider, model=model, interactions=cards))
    return messages


def from_vis(messages: Iterable[Any]) -> list[AssistantTurn | UserTurn]:
    """The turns of Vis messages exported by `to_vis`, in order."""
    return [from_vis_message(message) for message in _listed(messages, "Vis messages")]


def _listed(values: Any, what: str) -> list[Any]:
    """`values` as a list, or `InvalidVisMessage` when it is not a sequence (a string or an
    object is one value, not many)."""
    if isinstance(values, str | bytes | Mapping):
        raise InvalidVisMessage(f"{what} are a sequence")
    try:
        return list(values)
    except TypeError:
        raise InvalidVisMessage(f"{what} are a sequence") from None


# --- Vis: streaming events ----------------------------------------------------------------------


def vis_events(
    events: Iterable[StreamEvent], *, interactions: Iterable[Interaction] = ()
) -> list[dict[str, Any]]:
    """A turn's stream events in the Vis streaming contract (seed 000).

    `sequence` is the cursor, a plain number: the event's own sequence, so a client resumes
    with the last one it saw. `started` carries the block (status `streaming`; a streamed prose
    block with `markdown` ""), `delta` appends to `markdown`, `completed` names the block
    (terminal events never repeat the answer), and the turn ends with `turn.completed` and its
    status. Progress events (`turn.phase`, `turn.step`) have
    no Vis form and are left out.
    """
    limits = _limits(interactions)
    out: list[dict[str, Any]] = []
    for index, event in enumerate(events):
        head = {"turn_id": event.turn_id, "sequence": event.sequence}
        if isinstance(event, BlockStarted):
            data = dict(event.fields)
            streamed = event.block_kind in _PROSE_KINDS and "text" not in data
            probe = {**data, "text": "…"} if streamed else data
            _check_data(probe, event.index)
            block = _vis_block(data, "streaming", limits)
            if streamed:
                block["markdown"] = ""
            out.append(
                {"type": "content.block.started", **head, "index": event.index, "block": block}
            )
        elif isinstance(event, BlockDelta):
            out.append(
                {
                    "type": "content.block.delta",
                    **head,
                    "block_id": event.block_id,
                    "delta_index": event.delta_index,
                    "field": "markdown",
                    "text": event.text,
                }
            )
        elif isinstance(event, BlockCompleted):
            check_block(event.block, index)
            out.append({"type": "content.block.completed", **head, "block_id": event.block_id})
        elif isinstance(event, TurnCompleted):
            _checked(event.turn)
            out.append({"type": "turn.completed", **head, "status": event.turn.status.value})
        elif isinstance(event, TurnFailed):
            out.append({"type": "turn.completed", **head, "status": "failed", "code": event.code})
    return out


def _check_data(data: dict[str, Any], index: int) -> None:
    kind = data.get("kind")
    if kind not in _KIND_CLASS:
        try:
            block: Any = UnknownBlock.model_validate(data, context=STORED_CONTEXT)
        except ValidationError:
            raise ForgedBlock(
                index, str(kind), "an unknown block presented as a known kind"
            ) from None
    else:
        try:
            block = _BLOCK_ADAPTER.validate_python(data)
        except ValidationError:
            forged = _forged_receipt([data])
            if forged is not None:
                raise ForgedBlock(index, str(kind), forged.reason) from None
            raise ForgedBlock(index, str(kind), "its fields break the block's rules") from None
    check_block(block, index)


def apply_vis_events(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The content a Vis client holds after applying `events` in sequence order: each block as
    `started` gave it, its deltas appended, `completed` once completed. Deltas are deduplicated
    by (block_id, delta_index). An event of the wrong shape, or a delta that does not continue
    its block, raises `InvalidVisMessage`; events of other types are left alone."""
    blocks: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    next_delta: dict[str, int] = {}
    for event in sorted(_vis_event_list(events), key=lambda e: int(e["sequence"])):
        kind = event["type"]
        if kind == "content.block.started":
            block = dict(_field(event, "block", dict))
            block_id = _field(block, "id", str)
            if not isinstance(block.get("markdown", ""), str):
                raise InvalidVisMessage("a started block's markdown is not text")
            if block_id not in blocks:
                blocks[block_id] = block
                order.append(block_id)
                next_delta[block_id] = 0
        elif kind == "content.block.delta":
            block_id = _field(event, "block_id", str)
            at, text = _field(event, "delta_index", int), _field(event, "text", str)
            block = blocks.get(block_id, {})
            if block.get("status") != "streaming" or event.get("field") != "markdown":
                raise InvalidVisMessage("a delta for no incomplete prose block")
            if at < next_delta[block_id]:
                continue  # a repeat
            if at != next_delta[block_id]:
                raise InvalidVisMessage("a gap in a block's deltas")
            block["markdown"] = block.get("markdown", "") + text
            next_delta[block_id] += 1
        elif kind == "content.block.completed":
            done = blocks.get(_field(event, "block_id", str))
            if done is None:
                raise InvalidVisMessage("a completed event for no started block")
            done["status"] = "completed"
    return [blocks[block_id] for block_id in order]


def _vis_event_list(events: Any) -> list[Mapping[str, Any]]:
    """The events, each an object with a string `type` and a whole-number `sequence`."""
    listed = _listed(events, "Vis events")
    for index, event in enumerate(listed):
        if not isinstance(event, Mapping):
            raise InvalidVisMessage(f"event {index} is not an object")
        _field(event, "type", str)
        _field(event, "sequence", int)
    return listed


def _field(data: Mapping[str, Any], name: str, kind: type) -> Any:
    """`data[name]` when it is a `kind` (for `int`, a whole number: not negative, not a bool),
    else `InvalidVisMessage`."""
    value: Any = data.get(name)
    if kind is int:
        fits = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    else:
        fits = isinstance(value, kind)
    if not fits:
        raise InvalidVisMessage(f"an event's {name} is not a {kind.__name__}")
    return value
