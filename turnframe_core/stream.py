"""Stream events (what a client sees while a turn runs, DESIGN §8).

Every event carries the turn id, a per-turn `sequence` (1, 2, 3 ... with no gap: a client that
saw sequence N resumes "after N"; 0 means "from the start") and the time it was logged. Deltas
carry a per-block `delta_index`, so a client deduplicates by (block_id, delta_index).

What may be published when:
- progress (`turn.phase`, `turn.step`) states no outcome and may be published at once;
- blocks are published only from the commit on, and only once the reply they belong to passed
  composition and the claim guard (a delta of model prose never precedes `turn.phase`
  `committed`);
- server-written blocks are atomic: `started` carries every field, no delta follows;
- `turn.completed` carries the AssistantTurn and is published only after that turn was stored;
- a turn ends with exactly one `turn.completed` or `turn.failed`, and nothing follows it.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Final, Literal

from pydantic import Field, TypeAdapter

from turnframe_core.blocks import MODEL_KINDS, STORED_CONTEXT, ResponseBlock
from turnframe_core.canonical import Digest, digest
from turnframe_core.ids import TurnId
from turnframe_core.model import FrozenModel, Millis, NonEmptyStr
from turnframe_core.replay import TurnPhase
from turnframe_core.turn import AssistantTurn

__all__ = [
    "BlockCompleted",
    "BlockDelta",
    "BlockStarted",
    "StreamEvent",
    "StreamMode",
    "TurnCompleted",
    "TurnFailed",
    "TurnPhaseEvent",
    "TurnStep",
    "block_content_hash",
    "block_events",
    "is_terminal",
    "parse_stream_event",
    "publishes_outcomes",
    "split_tokens",
]


class StreamMode(StrEnum):
    """`whole`: every block arrives complete (the default). `tokens`: model-written prose also
    arrives as deltas, after the commit and after review passed the whole block."""

    WHOLE = "whole"
    TOKENS = "tokens"


class _Event(FrozenModel):
    turn_id: TurnId
    sequence: int = Field(ge=0)
    at: Millis = 0  # when it was logged (the runtime always sets it)


class TurnPhaseEvent(_Event):
    """The turn's phase marker moved (progress, never an outcome). The first one (`received`)
    names the stream's mode, so whoever finishes the turn goes on in it."""

    type: Literal["turn.phase"] = "turn.phase"
    phase: TurnPhase
    mode: StreamMode | None = None


class TurnStep(_Event):
    """A pipeline step begins (understand, execute, compose); progress only, never an outcome."""

    type: Literal["turn.step"] = "turn.step"
    step: NonEmptyStr


class BlockStarted(_Event):
    """A block begins. `index` is its position in the turn; `fields` holds every field of the
    block the server knows now: all of them, except a streamed block's `text`."""

    type: Literal["content.block.started"] = "content.block.started"
    block_id: NonEmptyStr
    block_kind: str
    index: int = Field(default=0, ge=0)
    author: Literal["model", "server"] = "server"
    fields: dict[str, Any] = Field(default_factory=dict)

    @property
    def kind(self) -> str:
        """The block's kind (`block_kind`)."""
        return self.block_kind


class BlockDelta(_Event):
    """A piece of a streamed block's `field`; the pieces, in `delta_index` order, concatenate to
    the completed block's value."""

    type: Literal["content.block.delta"] = "content.block.delta"
    block_id: NonEmptyStr
    field: Literal["text"] = "text"
    delta_index: int = Field(ge=0)
    text: str


class BlockCompleted(_Event):
    """The block's authoritative snapshot and the digest of its canonical form."""

    type: Literal["content.block.completed"] = "content.block.completed"
    block_id: NonEmptyStr
    block: ResponseBlock
    content_hash: Digest


class TurnCompleted(_Event):
    """The persisted turn; published only after it was stored."""

    type: Literal["turn.completed"] = "turn.completed"
    turn: AssistantTurn


class TurnFailed(_Event):
    """The turn ended without a reply, under a stable code; no block follows."""

    type: Literal["turn.failed"] = "turn.failed"
    code: NonEmptyStr


StreamEvent = Annotated[
    TurnPhaseEvent
    | TurnStep
    | BlockStarted
    | BlockDelta
    | BlockCompleted
    | TurnCompleted
    | TurnFailed,
    Field(discriminator="type"),
]

_ADAPTER: Final[TypeAdapter[StreamEvent]] = TypeAdapter(StreamEvent)
_TERMINAL: Final = frozenset({"turn.completed", "turn.failed"})


def parse_stream_event(data: str | bytes) -> StreamEvent:
    """A stream event from its JSON (stored blocks of unknown kinds are admitted)."""
    return _ADAPTER.validate_json(data, context=STORED_CONTEXT)


def is_terminal(event: StreamEvent) -> bool:
    """Whether the event ends its turn's stream (`turn.completed` or `turn.failed`)."""
    return event.type in _TERMINAL


def block_content_hash(block: ResponseBlock) -> str:
    return digest(block)


_TOKEN: Final = re.compile(r"\s*\S+\s*")


def split_tokens(text: str) -> tuple[str, ...]:
    """The pieces a streamed text is sent in: each word with the space around it, so that they
    concatenate to the text exactly."""
    pieces = tuple(_TOKEN.findall(text))
    return pieces if "".join(pieces) == text else (text,)


def block_events(
    block: ResponseBlock,
    index: int,
    *,
    turn_id: str,
    first_sequence: int,
    at: int,
    mode: StreamMode,
    content_hash: str | None = None,
) -> list[StreamEvent]:
    """One block's events, numbered from `first_sequence`: started, then (model prose in tokens
    mode only) one delta per token, then completed (`content_hash`: the block's digest, when the
    caller has it)."""
    data = block.model_dump(mode="json")
    kind = str(data.get("kind") or "unknown")
    streamed = (
        mode is StreamMode.TOKENS
        and kind in MODEL_KINDS
        and data.get("author") == "model"
        and isinstance(data.get("text"), str)
    )
    fields = {k: v for k, v in data.items() if not (streamed and k == "text")}
    block_id = str(data.get("block_id") or f"block_{index}")
    sequence = first_sequence
    events: list[StreamEvent] = [
        BlockStarted(
            turn_id=turn_id,
            sequence=sequence,
            at=at,
            block_id=block_id,
            block_kind=kind,
            index=index,
            author="model" if data.get("author") == "model" else "server",
            fields=fields,
        )
    ]
    if streamed:
        for delta_index, piece in enumerate(split_tokens(str(data["text"]))):
            sequence += 1
            events.append(
                BlockDelta(
                    turn_id=turn_id,
                    sequence=sequence,
                    at=at,
                    block_id=block_id,
                    delta_index=delta_index,
                    text=piece,
                )
            )
    events.append(
        BlockCompleted(
            turn_id=turn_id,
            sequence=sequence + 1,
            at=at,
            block_id=block_id,
            block=block,
            content_hash=content_hash or digest(data),
        )
    )
    return events


def publishes_outcomes(phase: TurnPhase) -> bool:
    """Blocks that may state an outcome are published only from the commit on."""
    return phase in (TurnPhase.COMMITTED, TurnPhase.COMPOSED, TurnPhase.DELIVERED)
