"""Audit replay: one turn's replay token answered read-only (DESIGN §11).

`audit_turn` reads what the stores hold about the turn — its replay record, the user turn as
received, the phase marker, the stored reply, the committed events, the journal, the cards, the
conversation's records and audit chain — and answers the ten audit questions in named sections,
each from stored data only. It executes nothing, calls no model, renders nothing and writes
nothing: every call it makes is a store read, and all of them read one snapshot
(`Stores.snapshot`), so what it reports is what was stored at one moment. `checks` verifies
every digest the data carries (the record against its chain link, the conversation's chain,
the understanding and plan hashes, the reply against the record) and the rules a record must
keep (each command authorized, each receipt backed by a committed event of this turn).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from turnframe_core import codes
from turnframe_core.audit_chain import ChainFinding, ChainLink, verify_conversation
from turnframe_core.blocks import ReceiptBlock
from turnframe_core.canonical import digest
from turnframe_core.erasure import (
    erase_card,
    erase_reply,
    erase_value,
    erased_block_digest,
    erased_event_digest,
    is_erased_form,
)
from turnframe_core.events import DomainEvent, event_digest
from turnframe_core.interactions import Interaction
from turnframe_core.model import FrozenModel, NonEmptyStr
from turnframe_core.replay import CommittedOutcome, ReplayRecord
from turnframe_core.stream import (
    BlockCompleted,
    BlockDelta,
    BlockStarted,
    StreamMode,
    TurnCompleted,
    TurnPhaseEvent,
    block_content_hash,
    block_events,
)
from turnframe_core.turn import SERVER_TURN_ORIGIN, AssistantTurn
from turnframe_runtime.stream import read_log
from turnframe_store.bundle import Stores
from turnframe_store.errors import NotFound

__all__ = [
    "AUDIT_QUESTIONS",
    "Audit",
    "AuditCheck",
    "ConversationChain",
    "audit_conversation",
    "audit_turn",
    "read_chain",
]

#: The ten questions an audit answers, as the names of its sections (DESIGN §11).
AUDIT_QUESTIONS: tuple[str, ...] = (
    "what_the_user_sent",
    "which_state_was_loaded",
    "what_was_understood",
    "which_model_calls_produced_it",
    "how_targets_resolved",
    "which_policy_applied_and_what_authorized_each_command",
    "what_committed",
    "which_event_backs_each_receipt",
    "what_was_returned",
    "how_far_the_turn_got",
)


class AuditCheck(FrozenModel):
    """One verification: what was checked, whether it held, and why not."""

    name: NonEmptyStr
    passed: bool
    detail: str = ""


class Audit(FrozenModel):
    """A turn's audit: the ten questions answered from stored data, and what was verified.
    `verified` holds when every check passed."""

    replay_token: NonEmptyStr
    account_id: NonEmptyStr
    conversation_id: NonEmptyStr
    turn_id: NonEmptyStr
    verified: bool
    what_the_user_sent: dict[str, Any]
    which_state_was_loaded: dict[str, Any]
    what_was_understood: dict[str, Any]
    which_model_calls_produced_it: list[dict[str, Any]]
    how_targets_resolved: list[dict[str, Any]]
    which_policy_applied_and_what_authorized_each_command: list[dict[str, Any]]
    what_committed: dict[str, Any]
    which_event_backs_each_receipt: list[dict[str, Any]]
    what_was_returned: dict[str, Any]
    how_far_the_turn_got: dict[str, Any]
    checks: tuple[AuditCheck, ...]
    chain: dict[str, Any] = Field(default_factory=dict)

    def failed(self) -> list[AuditCheck]:
        return [check for check in self.checks if not check.passed]

    def with_checks(self, checks: Sequence[AuditCheck]) -> Audit:
        return self.model_copy(
            update={"checks": tuple(checks), "verified": all(c.passed for c in checks)}
        )


@dataclass(frozen=True)
class ConversationChain:
    """One conversation's records, audit chain and turns, read as of one moment, and what
    verifying them found."""

    records: tuple[ReplayRecord, ...]
    links: tuple[ChainLink, ...]
    turn_ids: tuple[str, ...]
    findings: tuple[ChainFinding, ...]


async def read_chain(stores: Stores, account_id: str, conversation_id: str) -> ConversationChain:
    """The conversation as of one moment: its chain, turns and records read in one snapshot of
    the stores (`Stores.snapshot`), so a turn finishing while it reads is never seen half done,
    and a break it reports is in the stored data, not in the reading."""
    async with stores.snapshot() as view:
        return await _read_chain(view, account_id, conversation_id)


async def _read_chain(stores: Stores, account_id: str, conversation_id: str) -> ConversationChain:
    links = await stores.replay.chain(account_id, conversation_id)
    turns = await stores.conversations.list_turns(account_id, conversation_id)
    records = await stores.replay.for_conversation(account_id, conversation_id)
    turn_ids = tuple(t.turn_id for t in turns)
    return ConversationChain(
        records=records,
        links=links,
        turn_ids=turn_ids,
        findings=tuple(verify_conversation(records, links, turn_ids)),
    )


async def audit_turn(stores: Stores, account_id: str, replay_token: str) -> Audit:
    """The audit of the turn `replay_token` names (`NotFound` when the account holds none),
    every read of it made in one snapshot of the stores."""
    async with stores.snapshot() as view:
        return await _audit_turn(view, account_id, replay_token)


async def audit_conversation(
    stores: Stores, account_id: str, conversation_id: str
) -> tuple[ConversationChain, list[Audit]]:
    """The conversation's chain and the audit of each turn it records, oldest first, all read
    in one snapshot of the stores (the chain read once for all of them)."""
    async with stores.snapshot() as view:
        chain = await _read_chain(view, account_id, conversation_id)
        audits = [
            await _audit_turn(view, account_id, record.replay_token, chain)
            for record in chain.records
        ]
    return chain, audits


async def _audit_turn(
    stores: Stores, account_id: str, replay_token: str, chain: ConversationChain | None = None
) -> Audit:
    found = await stores.replay.get_by_token(account_id, replay_token)
    conversations = stores.conversations
    turn_id, conversation_id = found.turn_id, found.conversation_id
    if chain is None:
        chain = await _read_chain(stores, account_id, conversation_id)
    record = next((r for r in chain.records if r.turn_id == turn_id), found)
    links, findings = chain.links, chain.findings
    user_turn = await _maybe(conversations.get_user_turn(account_id, turn_id))
    marker = await _maybe(conversations.get_phase(account_id, turn_id))
    reply = await _maybe(conversations.get_assistant_turn(account_id, turn_id))
    receipts = [b for b in reply.blocks if isinstance(b, ReceiptBlock)] if reply else []
    cited = {event_id for receipt in receipts for event_id in receipt.event_ids}
    events = await stores.events.get_by_ids(account_id, sorted(set(record.event_ids) | cited))
    journal = {
        o.command_id: entry
        for o in record.command_outcomes
        if (entry := await _maybe(stores.journal.get(account_id, o.command_id)))
    }
    stored_cards = {
        interaction_id: await _maybe(stores.interactions.get(account_id, interaction_id))
        for interaction_id in record.interactions_created
    }
    cards = [card for card in stored_cards.values() if card is not None]
    streamed = await read_log(stores, account_id, turn_id)
    link = next((k for k in links if k.turn_id == turn_id), None)
    by_event = {event.event_id: event for event in events}
    return Audit(
        replay_token=record.replay_token,
        account_id=account_id,
        conversation_id=conversation_id,
        turn_id=turn_id,
        verified=False,  # set below, from the checks
        what_the_user_sent={
            "input": record.input.model_dump(mode="json"),
            "received_at": user_turn.received_at if user_turn else None,
            "locale": record.input.locale,
            # a turn nobody sent: the server wrote it (what caused it, e.g. an outbox answer)
            "server_turn": _server_cause(record),
        },
        which_state_was_loaded={
            "cases": [c.model_dump(mode="json") for c in record.loaded_cases],
            "workflow_versions": [w.model_dump(mode="json") for w in record.workflow_versions],
        },
        what_was_understood={
            "understanding": record.understanding,
            "understanding_hash": record.understanding_hash,
            "problems": [p.model_dump(mode="json") for p in record.understanding_problems],
            "reduction_plan": record.reduction_plan,
            "plan_hash": record.plan_hash,
        },
        which_model_calls_produced_it=[a.model_dump(mode="json") for a in record.provider_attempts],
        how_targets_resolved=[r.model_dump(mode="json") for r in record.target_resolutions],
        which_policy_applied_and_what_authorized_each_command=[
            d.model_dump(mode="json") for d in record.policy_decisions
        ],
        what_committed={
            "commands": [
                {
                    **o.model_dump(mode="json"),
                    "journal_status": (
                        journal[o.command_id].status.value if o.command_id in journal else None
                    ),
                }
                for o in record.command_outcomes
            ],
            "events": [e.model_dump(mode="json") for e in events if e.event_id in record.event_ids],
            "outbox_ids": list(record.outbox_ids),
            "interactions_created": [
                {
                    "interaction_id": card.interaction_id,
                    "kind": card.kind.value,
                    "status": card.status.value,
                    "title": card.payload.title,
                }
                for card in cards
            ],
        },
        which_event_backs_each_receipt=[
            {
                "block_id": receipt.block_id,
                "receipt_id": receipt.receipt_id,
                "status_code": receipt.status_code,
                "title": receipt.title,
                "events": [
                    {
                        "event_id": event_id,
                        "event_type": by_event[event_id].event_type
                        if event_id in by_event
                        else None,
                        "in_ledger": event_id in by_event,
                        "of_this_turn": event_id in record.event_ids,
                    }
                    for event_id in receipt.event_ids
                ],
            }
            for receipt in receipts
        ],
        what_was_returned={
            "stored": reply is not None,
            "schema_version": reply.schema_version if reply else None,
            "status": reply.status.value if reply else None,
            "blocks": [_block(block) for block in reply.blocks] if reply else [],
            "response_block_ids": list(record.response_block_ids),
            "prose_findings": [f.model_dump(mode="json") for f in record.prose_findings],
            "claim_violations": list(record.claim_violations),
            "copy_renders": [r.model_dump(mode="json") for r in record.copy_renders],
        },
        how_far_the_turn_got={
            "record_phase": record.phase.value,
            "marker_phase": marker.phase.value if marker else None,
            "failure_code": record.failure_code,
            "pending_reconciliations": list(record.pending_reconciliations()),
            "recorded_at": record.recorded_at,
        },
        checks=(),
        chain={
            "length": len(links),
            "position": link.position if link else None,
            "link_digest": link.link_digest if link else None,
            "findings": [f.model_dump(mode="json") for f in findings],
        },
    ).with_checks(
        [
            *_checks(record, reply, link, findings, events, user_turn),
            *_content_checks(record, reply, events, journal),
            *_card_checks(record, stored_cards),
            *_stream_checks(reply, streamed),
        ]
    )


def _checks(
    record: ReplayRecord,
    reply: AssistantTurn | None,
    link: ChainLink | None,
    findings: Sequence[ChainFinding],
    events: Sequence[Any],
    user_turn: Any,
) -> list[AuditCheck]:
    checks: list[AuditCheck] = []
    # What the chain's verification found about this record (it digested it once already).
    own = {f.code for f in findings if f.turn_id == record.turn_id}
    if link is not None:
        checks.append(
            _check(
                "the record is the one its chain link vouches for",
                codes.AUDIT_RECORD_ALTERED not in own,
                "the record's digest differs from its link's",
            )
        )
    else:
        checks.append(
            _check(
                "the record is linked once it is final",
                codes.AUDIT_RECORD_UNLINKED not in own,
                "a final record with no link",
            )
        )
    checks.append(
        _check(
            "the conversation's chain is intact",
            not findings,
            "; ".join(f"{f.code} ({f.turn_id or f.position})" for f in findings),
        )
    )
    if record.erased_at is not None and record.digest_scheme == 1:
        checks.append(
            _check(
                "the erased record's fields can be checked against its digest",
                False,
                "erased before records were sealed: only its whole digest is left, so what it "
                "keeps can no longer be checked (decision 0032)",
            )
        )
    if record.erased_at is not None:
        checks.append(
            _check(
                "the erased record holds no words, and the digest of each erased field",
                is_erased_form(record),
                "an erased record still holds words, or lost an erased field's digest",
            )
        )
    if record.understanding is not None:
        checks.append(
            _check(
                "the understanding's hash",
                digest(record.understanding) == record.understanding_hash,
                "the stored understanding does not give its hash",
            )
        )
    if record.reduction_plan is not None:
        checks.append(
            _check(
                "the reduction plan's hash",
                digest(record.reduction_plan) == record.plan_hash,
                "the stored plan does not give its hash",
            )
        )
    checks.append(
        _check(
            "the recorded input is the user turn as received",
            user_turn is not None and user_turn.input == record.input,
            "the user turn is missing or differs from the record's input",
        )
    )
    if reply is not None and record.phase.is_terminal:
        checks.append(
            _check(
                "the stored reply is the one the record lists",
                [b.block_id for b in reply.blocks] == list(record.response_block_ids),
                "the reply's blocks differ from the record's response block ids",
            )
        )
    ledger = {event.event_id for event in events}
    checks.append(
        _check(
            "every event the record lists is in the ledger",
            set(record.event_ids) <= ledger,
            ", ".join(sorted(set(record.event_ids) - ledger)),
        )
    )
    if reply is not None:
        unbacked = [
            block.block_id
            for block in reply.blocks
            if isinstance(block, ReceiptBlock) and not set(block.event_ids) <= ledger
        ]
        checks.append(
            _check(
                "every receipt cites committed events",
                not unbacked,
                ", ".join(unbacked),
            )
        )
    decided = {d.command_id: d for d in record.policy_decisions}
    unauthorized = [
        o.command_id
        for o in record.command_outcomes
        if isinstance(o.outcome, CommittedOutcome)
        and (o.command_id not in decided or not decided[o.command_id].allowed)
    ]
    checks.append(
        _check(
            "every committed command was authorized by a policy decision",
            not unauthorized,
            ", ".join(unauthorized),
        )
    )
    return checks


def _content_checks(
    record: ReplayRecord,
    reply: AssistantTurn | None,
    events: Sequence[DomainEvent],
    journal: Mapping[str, Any],
) -> list[AuditCheck]:
    """What the record's digests vouch for (the chain vouches for the record): each block of the
    stored reply, each committed event, each command's idempotency key."""
    checks: list[AuditCheck] = []
    if reply is not None and record.erased_at is not None:
        # What an erased block held can no longer be re-hashed; it must hold no words instead
        # (the record's hashes, which the chain vouches for, still stand for what it held).
        checks.append(
            _check(
                "each returned block was erased and holds no words",
                erase_reply(reply) == reply,
                "an erased turn's reply still holds words",
            )
        )
        if record.erased_block_hashes:  # what each block keeps, as the chain vouches for it
            kept = tuple(erased_block_digest(block) for block in reply.blocks)
            checks.append(
                _check(
                    "each erased block keeps what the record vouches for (erased-form digest)",
                    kept == record.erased_block_hashes,
                    ", ".join(
                        str(block.block_id)
                        for block, digest_now, recorded in zip(
                            reply.blocks, kept, record.erased_block_hashes, strict=False
                        )
                        if digest_now != recorded
                    )
                    or f"{len(kept)} blocks, {len(record.erased_block_hashes)} recorded",
                )
            )
    elif reply is not None and record.response_block_hashes:
        hashes = tuple(block_content_hash(block) for block in reply.blocks)
        differing = [
            str(block.block_id)
            for block, stored, recorded in zip(
                reply.blocks, hashes, record.response_block_hashes, strict=False
            )
            if stored != recorded
        ]
        if len(hashes) != len(record.response_block_hashes):
            differing.append(f"{len(hashes)} blocks, {len(record.response_block_hashes)} recorded")
        checks.append(
            _check(
                "each returned block is the one the record vouches for (content hash)",
                not differing,
                ", ".join(differing),
            )
        )
    if record.event_digests and record.erased_at is not None:
        # An erased turn's events lost their payloads (the record's digests stand for what
        # they held): each must be its erased self, its identity and order as committed.
        worded = [
            event.event_id
            for event in events
            if event.event_id in record.event_ids and erase_value(event.payload) != event.payload
        ]
        checks.append(
            _check(
                "each event of the erased turn holds no values",
                not worded and {e.event_id for e in events} >= set(record.event_ids),
                ", ".join(worded) or "an event the record lists is missing",
            )
        )
        if record.erased_event_digests:  # what each event keeps, as the chain vouches for it
            keeps = {event.event_id: erased_event_digest(event) for event in events}
            altered = [
                event_id
                for event_id, recorded in zip(
                    record.event_ids, record.erased_event_digests, strict=False
                )
                if keeps.get(event_id) != recorded
            ]
            checks.append(
                _check(
                    "each erased event keeps what the record vouches for (erased-form digest)",
                    not altered,
                    ", ".join(altered),
                )
            )
    elif record.event_digests:
        ledger = {event.event_id: event_digest(event) for event in events}
        altered = [
            event_id
            for event_id, recorded in zip(record.event_ids, record.event_digests, strict=False)
            if ledger.get(event_id) != recorded
        ]
        checks.append(
            _check(
                "each committed event is the one the record vouches for (digest)",
                not altered,
                ", ".join(altered),
            )
        )
    keys = [
        o.command_id
        for o in record.command_outcomes
        if o.command_id in journal and journal[o.command_id].idempotency_key != o.idempotency_key
    ]
    checks.append(
        _check(
            "each command's idempotency key is the journal's",
            not keys,
            ", ".join(keys),
        )
    )
    return checks


def _card_checks(
    record: ReplayRecord, stored: Mapping[str, Interaction | None]
) -> list[AuditCheck]:
    """Each card the turn created is stored as the record's digest vouches for (what a click
    on it runs comes from the stored card). A record begun before cards were digested and
    finished after (by recovery) digests only its last cards: the digests stand for the last
    ids; a record that digests none says nothing about its cards. Once the turn was erased, a
    settled card erased with it holds no words and is not re-hashed (the record's digest
    stands for what it held); any other card (still open, or settled since) keeps its words
    and its digest is checked as before."""
    checks: list[AuditCheck] = []
    erased: set[str] = set()
    if record.erased_at is not None:  # a card erased with its turn: its digest stood for words
        erased = {
            card.interaction_id
            for card in stored.values()
            if card is not None and not card.status.is_open and erase_card(card) == card
        }
    erased_digests = record.erased_interaction_digests
    if erased and erased_digests:  # what each erased card keeps, as the chain vouches for it
        ids = record.interactions_created[len(record.interactions_created) - len(erased_digests) :]
        altered = [
            interaction_id
            for interaction_id, recorded in zip(ids, erased_digests, strict=False)
            if interaction_id in erased
            and (card := stored.get(interaction_id)) is not None
            and card.content_digest() != recorded
        ]
        checks.append(
            _check(
                "each erased card keeps what the record vouches for (erased-form digest)",
                not altered,
                ", ".join(altered),
            )
        )
    digests = record.interaction_digests
    if not digests:
        return checks
    ids = record.interactions_created[len(record.interactions_created) - len(digests) :]
    differing = [
        interaction_id
        for interaction_id, recorded in zip(ids, digests, strict=False)
        if interaction_id not in erased
        and ((card := stored.get(interaction_id)) is None or card.content_digest() != recorded)
    ]
    if len(digests) > len(record.interactions_created):
        differing.append(f"{len(record.interactions_created)} cards, {len(digests)} digested")
    checks.append(
        _check(
            "each card the turn created is the one the record vouches for (digest)",
            not differing,
            ", ".join(differing),
        )
    )
    return checks


def _stream_checks(reply: AssistantTurn | None, streamed: Sequence[Any]) -> list[AuditCheck]:
    """While the turn's stream log is kept, what it serves (`resume_stream`) is the stored reply:
    each block's events (started with its fields, its deltas, completed with the block and its
    hash) are the events the stored block gives in the log's mode, and `turn.completed` holds
    the stored turn. Every event is compared by its content, never by a hash it carries."""
    blocks = [e for e in streamed if isinstance(e, _BLOCK_EVENTS)]
    ends = [e for e in streamed if isinstance(e, TurnCompleted)]
    if reply is None or not (blocks or ends):
        return []
    mode = next(
        (e.mode for e in streamed if isinstance(e, TurnPhaseEvent) and e.mode is not None),
        StreamMode.WHOLE,
    )
    expected: dict[str, list[dict[str, Any]]] = {}
    for index, block in enumerate(reply.blocks):
        for event in block_events(
            block,
            index,
            turn_id=reply.turn_id,
            first_sequence=1,
            at=0,
            mode=mode,
            content_hash=block_content_hash(block),
        ):
            expected.setdefault(str(block.block_id), []).append(_content(event))
    served: dict[str, list[dict[str, Any]]] = {}
    for event in blocks:
        served.setdefault(str(event.block_id), []).append(_content(event))
    differing = [
        block_id for block_id, events in served.items() if events != expected.get(block_id)
    ]
    differing += ["turn.completed" for e in ends if e.turn != reply]
    return [
        _check(
            "each streamed block is the stored block (content hash)",
            not differing,
            ", ".join(differing),
        )
    ]


_BLOCK_EVENTS = (BlockStarted, BlockDelta, BlockCompleted)


def _content(event: Any) -> dict[str, Any]:
    """A stream event's content: everything but when and where in the log it was written."""
    data: dict[str, Any] = event.model_dump(mode="json", exclude={"sequence", "at", "turn_id"})
    return data


def _check(name: str, passed: bool, detail: str) -> AuditCheck:
    return AuditCheck(name=name, passed=passed, detail="" if passed else detail)


def _block(block: Any) -> dict[str, Any]:
    data: dict[str, Any] = block.model_dump(mode="json")
    data["content_hash"] = digest(data)
    return data


def _server_cause(record: ReplayRecord) -> str | None:
    origin = record.input.origin_ref
    if not record.input.is_server_turn or origin is None:
        return None
    return origin.removeprefix(SERVER_TURN_ORIGIN)


async def _maybe(call: Any) -> Any:
    try:
        return await call
    except NotFound:
        return None
