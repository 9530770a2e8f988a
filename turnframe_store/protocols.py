"""The seven store roles, each split into a reader and a writer half (the commit role is whole).

Rules every implementation keeps (DESIGN §6):

1. Account scoping is total: the first argument is the account, and another account's record is
   indistinguishable from a missing one (`NotFound`; lists simply omit it). Exceptions: the outbox
   (a system queue addressed by `outbox_id`) and the operator sweeps `expire_due` and
   `list_unfinished_turns`, whose rows carry their account.
2. Only the errors of `turnframe_store.errors` are raised, each with its stable code.
3. Compare-and-swap in the writing step, never a blind overwrite: repeating a settled transition
   with the same data is accepted; settling it differently is `Conflict`, with nothing written.
4. Nothing is rewritten: card payloads, journal commands, events and assistant turns are
   immutable; only lifecycle fields move.
5. Every list names its sort key (below), so every implementation returns the same order. A list
   never raises `NotFound`: a missing or foreign parent gives an empty list.
6. Arguments are judged before anything else, and a refused one is `InvalidRecord` with nothing
   written: a limit is an int (never a bool) from 1 to `MAX_LIMIT`; a time is integer
   milliseconds from 0 to `MAX_MILLIS`; a revision or a sequence runs from 0 to `MAX_INTEGER`;
   an id or key (case ids, destinations, reasons included) holds no NUL and no lone surrogate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from turnframe_core.audit_chain import ChainLink
from turnframe_core.cases import CaseKey
from turnframe_core.events import DomainEvent
from turnframe_core.interactions import Interaction, InteractionStatus
from turnframe_core.replay import CommandOutcome, ReplayRecord, TurnPhase
from turnframe_core.stream import StreamEvent
from turnframe_core.turn import AssistantTurn
from turnframe_store.records import (
    CommitBundle,
    CommitResult,
    ConversationRecord,
    EventCursor,
    EventPage,
    JournalAdmission,
    JournalEntry,
    OutboxEntry,
    PhaseMarker,
    UserTurnRecord,
)

__all__ = [
    "CommandJournal",
    "CommandJournalReader",
    "CommandJournalWriter",
    "CommitStore",
    "ConversationReader",
    "ConversationStore",
    "ConversationWriter",
    "EventLedger",
    "EventLedgerReader",
    "EventLedgerWriter",
    "InteractionReader",
    "InteractionStore",
    "InteractionWriter",
    "OutboxReader",
    "OutboxStore",
    "OutboxWriter",
    "ReplayReader",
    "ReplayStore",
    "ReplayWriter",
]

# --- conversations, turns and the phase marker --------------------------------------------------


class ConversationReader(Protocol):
    async def get_conversation(self, account_id: str, conversation_id: str) -> ConversationRecord:
        """The conversation, or `NotFound`."""
        ...

    async def get_user_turn(self, account_id: str, turn_id: str) -> UserTurnRecord:
        """The user turn as received, or `NotFound`."""
        ...

    async def get_assistant_turn(self, account_id: str, turn_id: str) -> AssistantTurn:
        """The assistant turn byte-identical to what was stored (`NotFound` before it is); a
        turn of another schema major raises `UnsupportedSchemaVersion` (a core error)."""
        ...

    async def list_turns(self, account_id: str, conversation_id: str) -> tuple[UserTurnRecord, ...]:
        """The conversation's user turns, sorted by (received_at, turn_id)."""
        ...

    async def recent_turns(
        self, account_id: str, conversation_id: str, limit: int
    ) -> tuple[AssistantTurn, ...]:
        """The conversation's last `limit` stored assistant turns, exactly as returned, oldest
        first (sorted by the user turns' (received_at, turn_id)); turns without a stored reply
        are skipped. A turn of another schema major raises `UnsupportedSchemaVersion`."""
        ...

    async def get_phase(self, account_id: str, turn_id: str) -> PhaseMarker:
        """The turn's phase marker, or `NotFound`."""
        ...

    async def list_unfinished_turns(self, limit: int) -> tuple[PhaseMarker, ...]:
        """Operator sweep, every account: markers not delivered or failed, sorted by
        (updated_at, account_id, turn_id), at most `limit`."""
        ...

    async def stream_events(
        self, account_id: str, turn_id: str, after_sequence: int, limit: int
    ) -> tuple[StreamEvent, ...]:
        """The turn's logged stream events with a sequence above `after_sequence` (-1 to
        `MAX_INTEGER`), sorted by sequence, at most `limit`, each equal to what was appended.
        Empty for a missing or foreign turn, and for a pruned log."""
        ...

    async def stream_tail(self, account_id: str, turn_id: str) -> StreamEvent | None:
        """The turn's last logged stream event (None when nothing is logged, the turn is missing
        or foreign, or its log was pruned)."""
        ...


class ConversationWriter(Protocol):
    async def ensure_conversation(
        self, account_id: str, conversation_id: str
    ) -> ConversationRecord:
        """Create the conversation if it does not exist; either way return the stored record."""
        ...

    async def append_user_turn(self, record: UserTurnRecord) -> None:
        """Store a user turn and its `received` phase marker together.

        `NotFound` without the conversation; `Conflict` when the turn id is already stored (so a
        retried turn is detectable).
        """
        ...

    async def append_assistant_turn(
        self, account_id: str, turn: AssistantTurn, *, phase: TurnPhase | None = None
    ) -> None:
        """Store the terminal assistant turn once, as `turn.to_stored_json()`.

        The same canonical bytes again are accepted; different ones are `Conflict`. `NotFound`
        without the user turn. `phase`, when given, moves the marker in the same write (with
        `set_phase`'s rules).
        """
        ...

    async def set_phase(self, account_id: str, turn_id: str, phase: TurnPhase) -> PhaseMarker:
        """Move the turn's marker. A terminal phase never changes (`Conflict`); the same phase
        again is accepted unchanged."""
        ...

    async def append_stream_events(self, account_id: str, events: Sequence[StreamEvent]) -> None:
        """Log stream events of one turn, in order, after the ones already logged.

        `InvalidRecord` (nothing written) for an empty list, events of more than one turn,
        sequences that do not run on by one, or a terminal event (`turn.completed`,
        `turn.failed`) that is not the last. `NotFound` without the user turn. An event at a
        sequence already logged must equal the logged one (accepted, nothing rewritten); the
        first new one must come right after the last logged (the first of a turn is 1), and none
        may follow a logged terminal event: otherwise `Conflict`, with nothing written.
        """
        ...

    async def prune_stream_events(self, finished_before: int, limit: int) -> int:
        """Operator sweep, every account: delete the whole log of at most `limit` turns that
        ended (phase marker `delivered` or `failed`) and whose terminal event is older than
        `finished_before` (its `at`); the number of turns pruned. A log without a terminal
        event, or of a turn still unfinished (a reply whose outcome is unknown), is kept."""
        ...


class ConversationStore(ConversationReader, ConversationWriter, Protocol):
    pass


# --- interactions (cards) -----------------------------------------------------------------------


class InteractionReader(Protocol):
    async def get(self, account_id: str, interaction_id: str) -> Interaction:
        """The card with its current lifecycle fields, or `NotFound`."""
        ...

    async def open_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[Interaction, ...]:
        """The conversation's active and resolving cards, sorted by (created_at, interaction_id)."""
        ...

    async def for_case(self, account_id: str, case_key: CaseKey) -> tuple[Interaction, ...]:
        """Every card of the case in any status, sorted by (created_at, interaction_id)."""
        ...


class InteractionWriter(Protocol):
    async def insert(self, interaction: Interaction) -> Interaction:
        """Persist a new active card.

        A second open (active or resolving) blocking card for the same case is `Conflict`. The
        same card again (equal in everything but lifecycle fields) is accepted and returned as
        stored; a different card under a stored id is `Conflict`.
        """
        ...

    async def insert_replacing_blocking(self, interaction: Interaction) -> tuple[str, ...]:
        """Invalidate the case's active blocking card, then insert; return the replaced ids.

        A resolving blocking card cannot be replaced (`Conflict`, nothing written).
        """
        ...

    async def begin_resolution(
        self, account_id: str, interaction_id: str, option_id: str
    ) -> Interaction:
        """Claim an active card for an answer (active -> resolving). Exactly one caller wins; any
        other gets `Conflict`. An option the card does not offer is `InvalidRecord`."""
        ...

    async def finish(
        self,
        account_id: str,
        interaction_id: str,
        status: InteractionStatus,
        option_id: str | None = None,
        event_ids: Sequence[str] = (),
    ) -> Interaction:
        """Settle a resolving card as resolved, failed or active (released).

        `option_id`, when given, must be the claimed option. The same settlement again is
        accepted; a different one is `Conflict`.
        """
        ...

    async def decline(
        self, account_id: str, interaction_id: str, option_id: str | None = None
    ) -> Interaction:
        """active -> declined; the same decline again is accepted."""
        ...

    async def dismiss(self, account_id: str, interaction_id: str) -> Interaction:
        """active -> dismissed; a repeat is accepted."""
        ...

    async def invalidate_for_revision(
        self, account_id: str, case_key: CaseKey, current_revision: int
    ) -> tuple[str, ...]:
        """Invalidate the case's active cards bound to another revision, except revision-
        independent ones; return their ids sorted by (created_at, interaction_id)."""
        ...

    async def invalidate_case_cards(self, account_id: str, case_key: CaseKey) -> tuple[str, ...]:
        """Administrative: invalidate every active card of the case, revision-independent ones
        included; return their ids sorted by (created_at, interaction_id)."""
        ...

    async def expire_due(self, now: int, limit: int) -> tuple[Interaction, ...]:
        """Operator sweep, every account: expire active cards with expires_at <= now, sorted by
        (expires_at, account_id, interaction_id), at most `limit`; return them as expired."""
        ...


class InteractionStore(InteractionReader, InteractionWriter, Protocol):
    pass


# --- command journal ----------------------------------------------------------------------------


class CommandJournalReader(Protocol):
    async def get(self, account_id: str, command_id: str) -> JournalEntry:
        """The entry, or `NotFound`."""
        ...

    async def get_by_key(self, account_id: str, idempotency_key: str) -> JournalEntry:
        """The entry admitted under this key, or `NotFound`."""
        ...

    async def for_turn(self, account_id: str, turn_id: str) -> tuple[JournalEntry, ...]:
        """The turn's entries, sorted by (created_at, command_id)."""
        ...

    async def unsettled_for_turn(self, account_id: str, turn_id: str) -> tuple[JournalEntry, ...]:
        """The turn's pending, executing and outcome-unknown entries, sorted by
        (created_at, command_id)."""
        ...


class CommandJournalWriter(Protocol):
    async def begin(self, entry: JournalEntry) -> JournalAdmission:
        """Admit a pending or awaiting-confirmation entry: exactly one `Fresh` per
        (account, idempotency key), ever; later callers get `Replay(stored entry)`.

        The same key with a different command (case_ref, command_type, payload) is `Conflict`, and
        so is a command id already stored under another key.
        """
        ...

    async def mark_executing(self, account_id: str, command_id: str) -> JournalEntry:
        """pending | awaiting_confirmation -> executing; executing again is accepted."""
        ...

    async def complete(
        self, account_id: str, command_id: str, outcome: CommandOutcome
    ) -> JournalEntry:
        """Record the outcome along the journal's status machine. The same outcome again is
        accepted; a different one is `Conflict`."""
        ...


class CommandJournal(CommandJournalReader, CommandJournalWriter, Protocol):
    pass


# --- event ledger -------------------------------------------------------------------------------


class EventLedgerReader(Protocol):
    async def get_by_ids(
        self, account_id: str, event_ids: Sequence[str]
    ) -> tuple[DomainEvent, ...]:
        """The listed events, sorted by sequence, each once. Missing and foreign ids are simply
        absent (never `NotFound`)."""
        ...

    async def list_for_case(
        self, account_id: str, case_key: CaseKey, since_revision: int, limit: int
    ) -> tuple[DomainEvent, ...]:
        """The case's events with case_revision > since_revision, sorted by sequence, at most
        `limit` (a cap, not a page boundary: it may cut a revision in half)."""
        ...

    async def read_from(self, account_id: str, cursor: EventCursor, limit: int) -> EventPage:
        """The account's events after `cursor`, sorted by sequence, at most `limit`. Paging with
        `next_cursor` yields every event exactly once, even while the ledger grows."""
        ...


class EventLedgerWriter(Protocol):
    async def append(
        self, account_id: str, events: Sequence[DomainEvent]
    ) -> tuple[DomainEvent, ...]:
        """Append in the given order; return the events with their sequences (unique and
        increasing store-wide). A duplicate event id (stored or within the batch) is `Conflict`
        with nothing appended."""
        ...


class EventLedger(EventLedgerReader, EventLedgerWriter, Protocol):
    pass


# --- outbox -------------------------------------------------------------------------------------


class OutboxReader(Protocol):
    async def get(self, outbox_id: str) -> OutboxEntry:
        """The row, or `NotFound`."""
        ...

    async def list_for_command(self, command_id: str) -> tuple[OutboxEntry, ...]:
        """The command's rows, sorted by (created_at, outbox_id)."""
        ...

    async def pending_count(self) -> int:
        """How many rows are not completed or failed (pending, dispatching or unknown): the
        outbox's backlog, for lag alerts and for tests that wait for it to drain."""
        ...


class OutboxWriter(Protocol):
    async def enqueue(self, entry: OutboxEntry) -> OutboxEntry:
        """Add a pending row (any other status is `InvalidRecord`). A stored outbox id or a stored
        (destination, idempotency_key) is `Conflict`."""
        ...

    async def claim_due(self, now: int, limit: int, worker_id: str) -> tuple[OutboxEntry, ...]:
        """Claim pending rows due at `now` (next_attempt_at absent or <= now), sorted by
        (created_at, outbox_id), at most `limit`: each moves to dispatching with attempt_count + 1
        and the claim (worker_id, now). No row is ever handed to two claimers."""
        ...

    async def begin_dispatch(self, outbox_id: str, attempt: int, now: int) -> OutboxEntry:
        """An actor begins the claim's attempt `attempt` (dispatch_started_at = now). A row not
        dispatching that attempt, or whose attempt began already (a redelivered message: the
        attempt may have reached the destination), is `Conflict`."""
        ...

    async def mark_completed(self, outbox_id: str, attempt: int | None = None) -> OutboxEntry:
        """dispatching | outcome_unknown -> completed, claim cleared; a repeat is accepted. With
        `attempt`, only while the row is still at that attempt (else `Conflict`)."""
        ...

    async def mark_failed(
        self,
        outbox_id: str,
        reason: str,
        retry_at: int | None = None,
        attempt: int | None = None,
    ) -> OutboxEntry:
        """From pending, dispatching or outcome_unknown: back to pending due at `retry_at`, or
        (without it) failed. The same failure again is accepted. With `attempt`, only while the
        row is dispatching or unknown at that attempt (else `Conflict`)."""
        ...

    async def mark_outcome_unknown(
        self,
        outbox_id: str,
        remote_ref: str | None = None,
        check_at: int | None = None,
        attempt: int | None = None,
    ) -> OutboxEntry:
        """dispatching -> outcome_unknown, claim released, due for reconciliation at `check_at`
        (absent: at once). A repeat is accepted and fills in a missing remote_ref; a different
        remote_ref is `Conflict`. With `attempt`, only while the row is at that attempt (as
        `mark_completed`)."""
        ...

    async def unclaim(self, outbox_id: str, worker_id: str) -> OutboxEntry:
        """dispatching -> pending, due now, the attempt not counted: the claimer hands back a
        claim whose message never left (the broker refused it). Another worker's claim, or a
        row not dispatching, is `Conflict`."""
        ...

    async def claim_reconciliations(
        self, now: int, limit: int, until: int
    ) -> tuple[OutboxEntry, ...]:
        """Unknown outcomes due for reconciliation at `now` (next_attempt_at absent or <= now),
        sorted by (created_at, outbox_id), at most `limit`: each stays outcome_unknown and is
        not due again before `until` (a lease: a reconciler that dies is retried then)."""
        ...

    async def reschedule(self, outbox_id: str, at: int) -> OutboxEntry:
        """pending | outcome_unknown -> pending, due at `at`."""
        ...

    async def release_expired_claims(self, claimed_before: int) -> int:
        """Reaper: move dispatching rows claimed before `claimed_before` back to pending, due now;
        a row whose attempt had begun records `CLAIM_EXPIRED` as its last failure (its outcome
        was never recorded). Return how many moved."""
        ...


class OutboxStore(OutboxReader, OutboxWriter, Protocol):
    pass


# --- replay records -----------------------------------------------------------------------------


class ReplayReader(Protocol):
    async def get(self, account_id: str, turn_id: str) -> ReplayRecord:
        """The turn's replay record, or `NotFound`."""
        ...

    async def get_by_token(self, account_id: str, replay_token: str) -> ReplayRecord:
        """The record a replay token names, or `NotFound`."""
        ...

    async def for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[ReplayRecord, ...]:
        """The conversation's records sorted by (recorded_at of each turn's first put, turn_id):
        oldest turn first, as `verify_chain` reads them."""
        ...

    async def last_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> ReplayRecord | None:
        """The last record in `for_conversation`'s order (the one a new turn chains to), or
        None; it reads one record, however long the conversation."""
        ...

    async def chain(self, account_id: str, conversation_id: str) -> tuple[ChainLink, ...]:
        """The conversation's audit chain in position order: one link per final record, appended
        when the record became final and never changed."""
        ...

    async def accounts_with_token(self, replay_token: str) -> tuple[str, ...]:
        """Every account holding a record of `replay_token` (an auditor may know only the
        token), sorted."""
        ...

    async def accounts_with_conversation(self, conversation_id: str) -> tuple[str, ...]:
        """Every account holding records of a conversation with this id, sorted."""
        ...


class ReplayWriter(Protocol):
    async def put(self, record: ReplayRecord) -> None:
        """Upsert the turn's record. Once the stored phase is terminal only an identical record
        is accepted (else `Conflict`); the replay token must be derived from the turn id. The
        write that makes a record final (`delivered` or `failed`) also appends its `ChainLink`
        to the conversation's chain, once."""
        ...


class ReplayStore(ReplayReader, ReplayWriter, Protocol):
    pass


# --- commit -------------------------------------------------------------------------------------


class CommitStore(Protocol):
    async def commit(self, bundle: CommitBundle) -> CommitResult:
        """Apply the bundle all-or-nothing in its normative order: journal completions, events,
        card finishes, invalidations, card inserts, outbox rows, the replay record, the phase
        marker, the stream events (after the assistant turn). Each item keeps its own role's
        rules; if any item fails, nothing of the bundle remains and that item's error is
        raised."""
        ...
