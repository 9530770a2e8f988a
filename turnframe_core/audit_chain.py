"""The audit chain: immutable links over a conversation's final replay records.

A replay record changes while its turn runs (its phase moves on), so no chain may cite it until it
is final. When a turn's record becomes final (`delivered` or `failed`) the store appends, in the
same transaction, one `ChainLink` for it: its position in the conversation (0, 1, 2 … in the order
the conversation's turns became final, which its one-turn-at-a-time serialization fixes), the
record's digest, and the previous link's digest. Links are written once and never change, so a
verified chain cannot false-alarm; and each link names the record it vouches for, so a break
names the entry: an altered record, a deleted record or link, links out of order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from turnframe_core import codes
from turnframe_core.canonical import Digest, digest
from turnframe_core.ids import AccountId, ConversationId, TurnId
from turnframe_core.model import FrozenModel, Millis, NonEmptyStr, Whole
from turnframe_core.replay import ReplayRecord, verify_chain

__all__ = ["ChainFinding", "ChainLink", "verify_conversation", "verify_links"]


def _seal(fields: Mapping[str, Any]) -> str:
    """A link's digest: the digest of every other field of it (one definition, used to seal a
    link and to check one)."""
    return digest(dict(fields))


class ChainLink(FrozenModel):
    """One entry of a conversation's audit chain: the final record of one turn."""

    account_id: AccountId
    conversation_id: ConversationId
    position: Whole
    turn_id: TurnId
    #: the digest of the turn's final replay record
    record_digest: Digest
    #: the previous link's `link_digest` (None at position 0)
    previous: Digest | None = None
    #: when the record became final (its `recorded_at`)
    linked_at: Millis
    link_digest: Digest

    @classmethod
    def after(
        cls, previous: ChainLink | None, record: ReplayRecord, record_digest: str | None = None
    ) -> ChainLink:
        """The link for `record` (final) appended after `previous` (None: the first);
        `record_digest` when the caller has the record's digest already (its canonical text)."""
        fields = {
            "account_id": record.account_id,
            "conversation_id": record.conversation_id,
            "position": 0 if previous is None else previous.position + 1,
            "turn_id": record.turn_id,
            "record_digest": record_digest or record.digest(),
            "previous": None if previous is None else previous.link_digest,
            "linked_at": record.recorded_at,
        }
        return cls(**fields, link_digest=_seal(fields))

    def recomputed(self) -> str:
        """The digest this link's fields give (equal to `link_digest` unless it was altered)."""
        return _seal(self.model_dump(mode="json", exclude={"link_digest"}))


class ChainFinding(FrozenModel):
    """One thing a verification found, naming the entry: `turn_id` (a record, or the turn a link
    vouches for) and `position` (a link's place in the chain)."""

    code: NonEmptyStr
    turn_id: str | None = None
    position: int | None = None
    detail: str


def verify_links(
    records: Sequence[ReplayRecord],
    links: Sequence[ChainLink],
    turn_ids: Iterable[str] = (),
) -> list[ChainFinding]:
    """Every break in one conversation's chain; empty when it is intact.

    `records` are the conversation's replay records in the store's order, `links` its chain in
    position order, `turn_ids` every turn the conversation holds (a record deleted with its link
    still leaves its turn). A record that is not final yet (a turn in flight) has no link, and
    that is no break.
    """
    found: list[ChainFinding] = []

    def find(
        code: str, detail: str, turn_id: str | None = None, position: int | None = None
    ) -> None:
        found.append(ChainFinding(code=code, turn_id=turn_id, position=position, detail=detail))

    by_turn: Mapping[str, ReplayRecord] = {r.turn_id: r for r in records}
    prior: ChainLink | None = None
    for link in links:
        at = (link.turn_id, link.position)
        expected = 0 if prior is None else prior.position + 1
        if link.position != expected:  # one finding per gap, naming the first missing position
            find(
                codes.AUDIT_LINK_MISSING,
                f"the chain skips from position {expected - 1} to {link.position}",
                position=expected,
            )
        if link.recomputed() != link.link_digest:
            find(codes.AUDIT_LINK_ALTERED, "the link's fields do not give its digest", *at)
        elif link.previous != (prior.link_digest if prior is not None else None):
            find(codes.AUDIT_LINK_OUT_OF_ORDER, "the link does not cite the link before it", *at)
        record = by_turn.get(link.turn_id)
        if record is None:
            find(
                codes.AUDIT_RECORD_MISSING,
                "the chain vouches for a record the store no longer holds",
                *at,
            )
        elif record.digest() != link.record_digest:
            find(
                codes.AUDIT_RECORD_ALTERED,
                "the record differs from the one its link vouches for",
                *at,
            )
        prior = link
    linked = {link.turn_id for link in links}
    for record in records:
        if record.phase.is_terminal and record.turn_id not in linked:
            find(codes.AUDIT_RECORD_UNLINKED, "a final record no link vouches for", record.turn_id)
    for turn_id in turn_ids:
        if turn_id not in by_turn and turn_id not in linked:
            find(
                codes.AUDIT_RECORD_MISSING,
                "the conversation holds the turn but no record of it",
                turn_id,
            )
    return found


def verify_conversation(
    records: Sequence[ReplayRecord],
    links: Sequence[ChainLink],
    turn_ids: Iterable[str] = (),
) -> list[ChainFinding]:
    """`verify_links`, and each record's own `previous_digest` (the final record before it when
    it was written) checked against the records in the store's order, which names a record
    listed out of order."""
    found = verify_links(records, links, turn_ids)
    found.extend(
        ChainFinding(
            code=brk.code,
            turn_id=brk.turn_id,
            position=brk.position,
            detail="the record does not cite the record listed before it",
        )
        for brk in verify_chain(records)
    )
    return found
