"""Stream events (what a client sees while a turn runs).

Every event carries the turn id and a per-turn `sequence`; deltas carry a per-block `delta_index`,
so a client deduplicates by (block_id, delta_index) and resumes from its last sequence. Server
blocks arrive whole; only model prose may stream as deltas, and only after the plan committed.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from turnframe_core._canonical import Digest, digest
from turnframe_core._model import FrozenModel, NonEmptyStr
from turnframe_core.blocks import BlockKind, ResponseBlock
from turnframe_core.ids import BlockId, TurnId
from turnframe_core.replay import TurnPhase
from turnframe_core.turn import AssistantTurn

__all__ = [
    "BlockCompleted",
    "BlockDelta",
    "BlockStarted",
    "StreamEvent",
    "TurnCompleted",
    "TurnFailed",
    "TurnPhaseEvent",
    "TurnStep",
    "block_content_hash",
    "publishes_outcomes",
]


class _Event(FrozenModel):
    turn_id: TurnId
    sequence: int = Field(ge=0)


class TurnPhaseEvent(_Event):
    type: Literal["turn.phase"] = "turn.phase"
    phase: TurnPhase


class TurnStep(_Event):
    """An understanding or pipeline step; progress only, never an outcome."""

    type: Literal["turn.step"] = "turn.step"
    step: NonEmptyStr


class BlockStarted(_Event):
    type: Literal["content.block.started"] = "content.block.started"
    block_id: BlockId
    block_kind: BlockKind


class BlockDelta(_Event):
    type: Literal["content.block.delta"] = "content.block.delta"
    block_id: BlockId
    delta_index: int = Field(ge=0)
    text: str


class BlockCompleted(_Event):
    type: Literal["content.block.completed"] = "content.block.completed"
    block_id: BlockId
    block: ResponseBlock
    content_hash: Digest


class TurnCompleted(_Event):
    """The persisted turn; published only after it was stored."""

    type: Literal["turn.completed"] = "turn.completed"
    turn: AssistantTurn


class TurnFailed(_Event):
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


def block_content_hash(block: ResponseBlock) -> str:
    return digest(block)


def publishes_outcomes(phase: TurnPhase) -> bool:
    """Blocks that may state an outcome are published only from the commit on."""
    return phase in (TurnPhase.COMMITTED, TurnPhase.COMPOSED, TurnPhase.DELIVERED)
