"""Erasure: a person's words and values removed from what a turn stored, the audit kept.

Rules (decision 0032):
- Erasure removes words and values, never identity or order: ids, kinds, codes, statuses,
  positions, timestamps, digests and the shape of each document stay; every string a person
  wrote or a value was rendered into becomes `ERASED`, so an erased field says it was erased.
- Each function here is the one definition of its document's erased form, and it is idempotent:
  erasing an erased document gives it back unchanged. The audit relies on that: an erased
  document is checked by being its own erased form (it can carry no words), since what it held
  can no longer be re-hashed.
- A sealed replay record (`ReplayRecord.digest_scheme` 2) commits to each personal field through
  that field's own digest; erasure keeps the digest beside the emptied field, so the record's
  digest, and the chain link that cites it, do not change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from turnframe_core.blocks import BlockKind, ResponseBlock
from turnframe_core.canonical import digest
from turnframe_core.erased import ERASED, ERASED_URI, erase_input, erase_value
from turnframe_core.events import DomainEvent
from turnframe_core.interactions import Interaction, InteractionPayload
from turnframe_core.model import FrozenModel, Millis, NonEmptyStr
from turnframe_core.replay import (
    PERSONAL_RECORD_FIELDS,
    ReplayRecord,
    personal_field_digest,
)
from turnframe_core.turn import AssistantTurn

__all__ = [
    "ERASED",
    "ERASED_URI",
    "ErasureReport",
    "TurnErasure",
    "erase_card",
    "erase_input",
    "erase_record",
    "erase_reply",
    "erase_value",
    "erased_block_digest",
    "erased_card_digest",
    "erased_event_digest",
    "is_erased_form",
]

#: Keys whose strings are words (a person's, or copy rendered with values).
_WORDS: Final = frozenset(
    {
        "text",
        "title",
        "body",
        "label",
        "before",
        "after",
        "freeform_prompt",
        "freeform_argument",
        "quote",
    }
)
#: Keys whose whole value is data a person's values went into (an argument's value, a copy
#: sentence's parameters, an action's payload, a card's own metadata): erased leaf by leaf
#: (`erase_value`).
_VALUES: Final = frozenset({"value", "params", "payload", "metadata"})
#: Keys of a reply's blocks whose value is the person's values a sentence was written from (the
#: facts it used, the moves it was written as): emptied.
_EMPTIED: Final = frozenset({"facts_used", "moves"})
_KNOWN_KINDS: Final = frozenset(kind.value for kind in BlockKind)


def _erase_words(data: Mapping[str, Any]) -> dict[str, Any]:
    """A stored document (a block, a card's payload) with its words erased, its shape kept."""
    erased: dict[str, Any] = {}
    for key, value in data.items():
        if key in _EMPTIED:
            erased[key] = []
        elif key in _WORDS and isinstance(value, str):
            erased[key] = ERASED
        elif key in _VALUES or (key == "arguments" and isinstance(value, Mapping)):
            erased[key] = erase_value(value)
        elif isinstance(value, Mapping):
            erased[key] = _erase_words(value)
        elif isinstance(value, list):
            erased[key] = [_erase_words(v) if isinstance(v, Mapping) else v for v in value]
        else:
            erased[key] = value
    if data.get("kind") == "artifact":  # its name and where it lies are the person's file's
        erased.update(name=ERASED, uri_ref=ERASED_URI)
    return erased


def _erased_block_json(block: dict[str, Any]) -> dict[str, Any]:
    if block.get("kind") in _KNOWN_KINDS:
        return _erase_words(block)
    # a block of a kind this version does not know (kept opaque): only its kind and id stay
    return {k: v if k in ("kind", "block_id") else erase_value(v) for k, v in block.items()}


def erased_block_digest(block: ResponseBlock) -> str:
    """The digest of `block`'s erased form (the record keeps it from the turn on, so an erased
    block is still checked against what the chain vouches for)."""
    return digest(_erased_block_json(block.model_dump(mode="json")))


def erased_event_digest(event: DomainEvent) -> str:
    """The digest of `event`'s erased form, as committed (its sequence left out)."""
    data = event.model_dump(mode="json", exclude={"sequence"})
    return digest({**data, "payload": erase_value(data["payload"])})


def erased_card_digest(card: Interaction) -> str:
    """The content digest of `card`'s erased form."""
    return erase_card(card).content_digest()


def erase_reply(turn: AssistantTurn) -> AssistantTurn:
    """A stored reply without its words: each block keeps its kind, id, author, codes, the
    events and card it cites and its copy reference; its text, titles, labels and the facts it
    used are erased. The carry-over fields (case references, offers) are ids and stay."""
    data = turn.model_dump(mode="json")
    data["blocks"] = [_erased_block_json(block) for block in data["blocks"]]
    return AssistantTurn.model_validate(data, context={"turnframe_stored": True})


def erase_card(card: Interaction) -> Interaction:
    """A stored card without its words: title, body, option labels, the review's values and
    what its actions would have run with are erased (a settled card never runs again); its
    kind, options, action kinds, case, status and times stay. Its payload hash is the erased
    payload's (the replay record's digest of the card stands for what it held)."""
    data = card.model_dump(mode="json")
    payload = InteractionPayload.model_validate(_erase_words(data["payload"]))
    data.update(payload=payload, payload_hash=payload.hash())
    return Interaction.model_validate(data)


def erase_record(record: ReplayRecord, at: int) -> ReplayRecord:
    """The record without a person's words and values: each personal field emptied, the digest
    of what it held kept in `erased` (a sealed record's digest is unchanged). A record sealed
    before (`digest_scheme` 1) keeps its whole digest instead: its remaining fields can then no
    longer be checked against it, and the audit says so. Idempotent."""
    if record.erased_at is not None:
        return record
    data = {name: getattr(record, name) for name in type(record).model_fields}
    if record.digest_scheme == 1:
        kept = {"record": record.digest()}
    else:
        dumped = record.model_dump(mode="json")
        kept = {name: personal_field_digest(dumped, name) for name in PERSONAL_RECORD_FIELDS}
    data.update(
        input=erase_input(record.input),
        understanding=None,
        reduction_plan=None,
        copy_renders=(),
        erased=kept,
        erased_at=max(at, 0),
    )
    return ReplayRecord.model_validate(data)


def is_erased_form(record: ReplayRecord) -> bool:
    """An erased record holds no words: each personal field is what erasure leaves, and it
    keeps a digest for what each held (the audit's check of an erased record)."""
    if record.erased_at is None:
        return False
    if record.digest_scheme == 1:
        digests_kept = set(record.erased) == {"record"}
    else:
        digests_kept = set(record.erased) == set(PERSONAL_RECORD_FIELDS)
    return digests_kept and all(record.holds_erased(name) for name in PERSONAL_RECORD_FIELDS)


class TurnErasure(FrozenModel):
    """What erasing one turn did: `erased` when its documents now hold no words (or already
    held none); `kept` names what still holds them and why (a card still open, a command or an
    outbox row not settled): erasing again once they settle removes them."""

    turn_id: NonEmptyStr
    erased: bool
    already: bool = False
    kept: tuple[str, ...] = ()


class ErasureReport(FrozenModel):
    """What `runtime.erase` did to a subject: each turn's erasure, and when."""

    account_id: NonEmptyStr
    subject: NonEmptyStr
    erased_at: Millis
    turns: tuple[TurnErasure, ...] = ()

    @property
    def complete(self) -> bool:
        """True when nothing of the subject still holds words."""
        return all(t.erased and not t.kept for t in self.turns)
