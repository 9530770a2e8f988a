"""The structural claim guard (runs on every composed turn; a violating turn is never returned or
stored).

It reads blocks, never prose: a phrase filter cannot see negation, a structure can. One code per
rule:
- a receipt without events (`CLAIM_RECEIPT_WITHOUT_EVENTS`);
- two receipts with one receipt id (`CLAIM_DUPLICATE_RECEIPT_ID`);
- a prose block's operational-outcome fact with no receipt in the turn whose events cover it
  (`CLAIM_UNBACKED_OUTCOME`);
- a prose block's interaction fact with no such card in the turn (`CLAIM_INTERACTION_NOT_IN_TURN`).

Each violation names who wrote the block: a model's prose that breaks a rule is replaced by server
copy; server-written prose (or a server block) that breaks one is a server bug, never shown.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from turnframe_core import codes
from turnframe_core.blocks import AnswerBlock, InteractionBlock, ReceiptBlock, TransitionBlock
from turnframe_core.errors import TurnframeError
from turnframe_core.facts import InteractionAvailable, OperationalOutcome
from turnframe_core.model import FrozenModel

__all__ = ["ClaimGuardViolation", "ClaimViolation", "check_claims", "ensure_claims"]


class ClaimViolation(FrozenModel):
    code: str
    block_id: str
    ref: str
    #: who wrote the violating block: "model" (its draft is discarded) or "server" (a bug)
    author: Literal["model", "server"] = "server"


class ClaimGuardViolation(TurnframeError):
    """A composed turn states something nothing in it backs."""

    code = codes.CLAIM_VIOLATION

    def __init__(self, violations: tuple[ClaimViolation, ...]) -> None:
        super().__init__("claim guard: " + ", ".join(sorted({v.code for v in violations})))
        self.violations = violations


def check_claims(blocks: Iterable[Any]) -> list[ClaimViolation]:
    """Every violation in these blocks (empty: the turn may be returned)."""
    blocks = list(blocks)
    violations: list[ClaimViolation] = []
    receipts: dict[str, frozenset[str]] = {}
    cards: set[str] = set()
    for block in blocks:
        if isinstance(block, ReceiptBlock):
            events = frozenset(block.event_ids or ())
            if not events:
                violations.append(
                    ClaimViolation(
                        code=codes.CLAIM_RECEIPT_WITHOUT_EVENTS,
                        block_id=block.block_id,
                        ref=block.receipt_id,
                    )
                )
            if block.receipt_id in receipts:
                violations.append(
                    ClaimViolation(
                        code=codes.CLAIM_DUPLICATE_RECEIPT_ID,
                        block_id=block.block_id,
                        ref=block.receipt_id,
                    )
                )
            else:
                receipts[block.receipt_id] = events
        elif isinstance(block, InteractionBlock):
            cards.add(block.interaction_id)
    for block in blocks:
        if not isinstance(block, AnswerBlock | TransitionBlock):
            continue
        for fact in block.facts_used:
            if isinstance(fact, OperationalOutcome):
                backing = receipts.get(fact.receipt_id)
                if not backing or not set(fact.event_ids) <= backing:
                    violations.append(
                        ClaimViolation(
                            code=codes.CLAIM_UNBACKED_OUTCOME,
                            block_id=block.block_id,
                            ref=fact.receipt_id,
                            author=block.author,
                        )
                    )
            elif isinstance(fact, InteractionAvailable) and fact.interaction_id not in cards:
                violations.append(
                    ClaimViolation(
                        code=codes.CLAIM_INTERACTION_NOT_IN_TURN,
                        block_id=block.block_id,
                        ref=fact.interaction_id,
                        author=block.author,
                    )
                )
    return violations


def ensure_claims(blocks: Iterable[Any]) -> None:
    """Raise `ClaimGuardViolation` if any rule is broken."""
    violations = check_claims(blocks)
    if violations:
        raise ClaimGuardViolation(tuple(violations))
