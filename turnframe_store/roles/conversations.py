"""The conversations role: conversations, user and assistant turns, the phase marker and the
stream log; its contract (the public methods) and the judges its stores apply.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, get_args

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from turnframe_core.canonical import CanonicalJsonError, canonical_json
from turnframe_core.replay import TurnPhase
from turnframe_core.stream import StreamEvent, is_terminal, parse_stream_event
from turnframe_core.turn import AssistantTurn
from turnframe_store.errors import Conflict, Corrupt, InvalidRecord, NotFound
from turnframe_store.faults import FaultPoint
from turnframe_store.records import (
    ConversationRecord,
    FeedEntry,
    PhaseMarker,
    UserTurnRecord,
    stream_event_problems,
)
from turnframe_store.roles import rules
from turnframe_store.roles.rules import MAX_INTEGER, Role, Verdict, bounded, encodes, instant, text

TERMINAL_PHASES: Final = frozenset(phase for phase in TurnPhase if phase.is_terminal)


def new_conversation(account_id: str, conversation_id: str, at: int) -> ConversationRecord:
    try:
        return ConversationRecord(
            account_id=account_id, conversation_id=conversation_id, created_at=at
        )
    except ValidationError:
        raise InvalidRecord("not a well-formed account or conversation id") from None


def own_turn(account_id: str, turn: AssistantTurn) -> None:
    if turn.account_id != account_id:
        raise InvalidRecord("the assistant turn belongs to another account")


def answer_text(turn: AssistantTurn) -> str:
    """The canonical text a store keeps for an assistant turn: only a terminal one is kept."""
    if not turn.status.is_terminal:
        raise InvalidRecord("only a terminal assistant turn is stored")
    try:
        return turn.to_stored_json()
    except CanonicalJsonError:
        raise InvalidRecord("the assistant turn has no canonical form") from None


def answer(turn: AssistantTurn, conversation_id: str | None, stored: str | None) -> str | None:
    """Judge storing `turn` beside its user turn (of `conversation_id`, None when there is
    none) that already holds `stored`: the text to write, or None for the same turn again."""
    if conversation_id is None:
        raise NotFound()
    if turn.conversation_id != conversation_id:
        raise InvalidRecord("the assistant turn belongs to another conversation")
    written = answer_text(turn)
    if stored is None:
        return written
    if stored != written:
        raise Conflict("the assistant turn is already stored with other content")
    return None


def reload_answer(text: str) -> AssistantTurn:
    """The assistant turn a store kept as `text`, which must reload byte for byte. A turn of
    another schema major raises `UnsupportedSchemaVersion` unchanged: it is not corrupt."""
    try:
        turn = AssistantTurn.from_stored_json(text)
    except ValidationError:
        raise Corrupt("the stored assistant turn does not read back") from None
    if turn.to_stored_json() != text:
        raise Corrupt("the stored assistant turn does not reload byte for byte")
    return turn


def move_phase(marker: PhaseMarker, phase: TurnPhase) -> Verdict:
    """A marker moves anywhere until its phase is terminal; the same phase again is a repeat."""
    if marker.phase is phase:
        return Verdict.REPEAT
    if marker.phase in TERMINAL_PHASES:
        raise Conflict("the turn's phase is final")
    return Verdict.MOVE


STREAM_EVENT_TYPES: Final = get_args(get_args(StreamEvent)[0])


@dataclass(frozen=True)
class StreamEntry:
    """A stream event as a store logs it: its JSON `text`, and the columns beside it."""

    turn_id: str
    sequence: int
    event_type: str
    terminal: bool
    at: int
    text: str


def stream_entries(events: Sequence[StreamEvent]) -> tuple[StreamEntry, ...]:
    """The entries a batch of stream events is logged as, judged on its own: a non-empty list of
    one turn's events, sequences running on by one from 1 up to `MAX_INTEGER`, times up to
    `MAX_MILLIS`, a terminal event only last, each with a JSON form. Else `InvalidRecord`."""
    listed = tuple(events)
    if not listed:
        raise InvalidRecord("no stream events to append")
    if not all(isinstance(event, STREAM_EVENT_TYPES) for event in listed):
        raise InvalidRecord("not a stream event")
    for event in listed:
        bounded(event.sequence, 1, MAX_INTEGER, "a stream event sequence")
        instant(event.at)
    problems = stream_event_problems(listed)
    if problems:
        raise InvalidRecord(problems[0])
    text(listed[0].turn_id)
    entries: list[StreamEntry] = []
    for event in listed:
        # pydantic's own JSON (fields in model order): several times faster than the canonical
        # form for events that carry a whole turn, and as stable for one model; an event is
        # compared with its repeat only as written by the same code.
        try:
            written = event.model_dump_json()
            if "NaN" in written or "Infinity" in written:  # a number JSON has not?
                canonical_json(event)  # raises for one; a string that says so is fine
        except (PydanticSerializationError, CanonicalJsonError, ValueError):
            raise InvalidRecord("the stream event has no JSON form") from None
        if not (written.isascii() or encodes(written)):
            raise InvalidRecord("the stream event holds a lone surrogate")
        entries.append(
            StreamEntry(
                event.turn_id, event.sequence, event.type, is_terminal(event), event.at, written
            )
        )
    return tuple(entries)


def stream_append(batch: Sequence[StreamEntry], logged: Sequence[StreamEntry]) -> int:
    """Judge logging `batch` beside `logged`, the turn's logged entries from the sequence before
    the batch's first to its last (sorted by sequence): how many of the batch's first entries
    are logged already (each must equal the logged one); the rest are new. The first new entry
    comes right after the last logged one (1 for an empty log), never after a terminal one.
    Else `Conflict`."""
    stored = {entry.sequence: entry.text for entry in logged}
    known = 0
    for entry in batch:
        if entry.sequence not in stored:
            break
        if stored[entry.sequence] != entry.text:
            raise Conflict("another stream event is logged at this sequence")
        known += 1
    if known == len(batch):
        return known
    last = logged[-1] if logged else None
    if batch[known].sequence != (last.sequence if last is not None else 0) + 1:
        raise Conflict("the stream event does not follow the last logged one")
    if last is not None and last.terminal:
        raise Conflict("the turn's stream has ended")
    return known


def stream_window(batch: Sequence[StreamEntry]) -> tuple[int, int]:
    """The sequences `stream_append` needs logged entries of (both ends included)."""
    return batch[0].sequence - 1, batch[-1].sequence


def reload_stream_event(stored: str) -> StreamEvent:
    """The stream event a store logged as `stored`."""
    try:
        return parse_stream_event(stored)
    except ValidationError:
        raise Corrupt("a logged stream event does not read back") from None


class ConversationReader(Role, ABC):
    """The reading half of the conversations role."""

    async def get_conversation(self, account_id: str, conversation_id: str) -> ConversationRecord:
        """The conversation, or `NotFound`."""
        rules.text(account_id, conversation_id)
        return await self._get_conversation(account_id, conversation_id)

    async def get_user_turn(self, account_id: str, turn_id: str) -> UserTurnRecord:
        """The user turn as received, or `NotFound`."""
        rules.text(account_id, turn_id)
        return await self._get_user_turn(account_id, turn_id)

    async def get_assistant_turn(self, account_id: str, turn_id: str) -> AssistantTurn:
        """The assistant turn byte-identical to what was stored (`NotFound` before it is); a
        turn of another schema major raises `UnsupportedSchemaVersion` (a core error)."""
        rules.text(account_id, turn_id)
        return await self._get_assistant_turn(account_id, turn_id)

    async def list_turns(self, account_id: str, conversation_id: str) -> tuple[UserTurnRecord, ...]:
        """The conversation's user turns, sorted by (received_at, turn_id)."""
        rules.text(account_id, conversation_id)
        return await self._list_turns(account_id, conversation_id)

    async def recent_turns(
        self, account_id: str, conversation_id: str, limit: int
    ) -> tuple[AssistantTurn, ...]:
        """The conversation's last `limit` stored assistant turns, exactly as returned, oldest
        first (sorted by the user turns' (received_at, turn_id)); turns without a stored reply
        are skipped. A turn of another schema major raises `UnsupportedSchemaVersion`."""
        rules.text(account_id, conversation_id)
        texts = await self._recent_turns(account_id, conversation_id, rules.limit(limit))
        return tuple(reload_answer(text) for text in texts)

    async def feed(
        self, account_id: str, conversation_id: str, after_position: int, limit: int
    ) -> tuple[FeedEntry, ...]:
        """The conversation's audit-chain links with a position above `after_position` (-1 to
        `MAX_INTEGER`: -1 reads from the start), sorted by position (commit order), at most
        `limit`, each with its turn's stored assistant turn exactly as stored (None when the
        final record has no stored reply). Empty for a missing or foreign conversation. A turn
        of another schema major raises `UnsupportedSchemaVersion`."""
        rules.text(account_id, conversation_id)
        after, most = rules.after_sequence(after_position), rules.limit(limit)
        rows = await self._feed(account_id, conversation_id, after, most)
        return tuple(
            FeedEntry(
                position=position,
                turn_id=turn_id,
                turn=None if text is None else reload_answer(text),
            )
            for position, turn_id, text in rows
        )

    async def get_phase(self, account_id: str, turn_id: str) -> PhaseMarker:
        """The turn's phase marker, or `NotFound`."""
        rules.text(account_id, turn_id)
        return await self._get_phase(account_id, turn_id)

    async def list_unfinished_turns(self, limit: int) -> tuple[PhaseMarker, ...]:
        """Operator sweep, every account: markers not delivered or failed, sorted by
        (updated_at, account_id, turn_id), at most `limit`."""
        return await self._list_unfinished_turns(rules.limit(limit))

    async def stream_events(
        self, account_id: str, turn_id: str, after_sequence: int, limit: int
    ) -> tuple[StreamEvent, ...]:
        """The turn's logged stream events with a sequence above `after_sequence` (-1 to
        `MAX_INTEGER`), sorted by sequence, at most `limit`, each equal to what was appended.
        Empty for a missing or foreign turn, and for a pruned log."""
        rules.text(account_id, turn_id)
        after, most = rules.after_sequence(after_sequence), rules.limit(limit)
        texts = await self._stream_events(account_id, turn_id, after, most)
        return tuple(reload_stream_event(text) for text in texts)

    async def stream_tail(self, account_id: str, turn_id: str) -> StreamEvent | None:
        """The turn's last logged stream event (None when nothing is logged, the turn is missing
        or foreign, or its log was pruned)."""
        rules.text(account_id, turn_id)
        text = await self._stream_tail(account_id, turn_id)
        return None if text is None else reload_stream_event(text)

    @abstractmethod
    async def _get_conversation(
        self, account_id: str, conversation_id: str
    ) -> ConversationRecord: ...

    @abstractmethod
    async def _get_user_turn(self, account_id: str, turn_id: str) -> UserTurnRecord: ...

    @abstractmethod
    async def _get_assistant_turn(self, account_id: str, turn_id: str) -> AssistantTurn: ...

    @abstractmethod
    async def _list_turns(
        self, account_id: str, conversation_id: str
    ) -> tuple[UserTurnRecord, ...]: ...

    @abstractmethod
    async def _recent_turns(
        self, account_id: str, conversation_id: str, limit: int
    ) -> tuple[str, ...]:
        """The stored texts of the last `limit` assistant turns, oldest first."""

    @abstractmethod
    async def _feed(
        self, account_id: str, conversation_id: str, after_position: int, limit: int
    ) -> tuple[tuple[int, str, str | None], ...]:
        """(position, turn id, stored assistant turn text or None) of the conversation's links
        after `after_position`, by position."""

    @abstractmethod
    async def _get_phase(self, account_id: str, turn_id: str) -> PhaseMarker: ...

    @abstractmethod
    async def _list_unfinished_turns(self, limit: int) -> tuple[PhaseMarker, ...]: ...

    @abstractmethod
    async def _stream_events(
        self, account_id: str, turn_id: str, after_sequence: int, limit: int
    ) -> tuple[str, ...]:
        """The logged texts of the turn's events after `after_sequence`, by sequence."""

    @abstractmethod
    async def _stream_tail(self, account_id: str, turn_id: str) -> str | None: ...


class ConversationWriter(Role, ABC):
    """The writing half of the conversations role."""

    async def ensure_conversation(
        self, account_id: str, conversation_id: str
    ) -> ConversationRecord:
        """Create the conversation if it does not exist; either way return the stored record."""
        rules.text(account_id, conversation_id)
        return await self._ensure_conversation(account_id, conversation_id)

    async def append_user_turn(self, record: UserTurnRecord) -> None:
        """Store a user turn and its `received` phase marker together.

        `NotFound` without the conversation; `Conflict` when the turn id is already stored (so a
        retried turn is detectable).
        """
        await self._append_user_turn(record)

    async def append_assistant_turn(
        self, account_id: str, turn: AssistantTurn, *, phase: TurnPhase | None = None
    ) -> None:
        """Store the terminal assistant turn once, as `turn.to_stored_json()`.

        The same canonical bytes again are accepted; different ones are `Conflict`. `NotFound`
        without the user turn. `phase`, when given, moves the marker in the same write (with
        `set_phase`'s rules).
        """
        rules.text(account_id)
        own_turn(account_id, turn)
        moved = None if phase is None else rules.turn_phase(phase)
        self._faults.reach(FaultPoint.BEFORE_RESPONSE_PERSISTENCE)
        await self._append_assistant_turn(account_id, turn, moved)

    async def set_phase(self, account_id: str, turn_id: str, phase: TurnPhase) -> PhaseMarker:
        """Move the turn's marker. A terminal phase never changes (`Conflict`); the same phase
        again is accepted unchanged."""
        rules.text(account_id, turn_id)
        return await self._set_phase(account_id, turn_id, rules.turn_phase(phase))

    async def append_stream_events(self, account_id: str, events: Sequence[StreamEvent]) -> None:
        """Log stream events of one turn, in order, after the ones already logged.

        `InvalidRecord` (nothing written) for an empty list, events of more than one turn,
        sequences that do not run on by one, or a terminal event (`turn.completed`,
        `turn.failed`) that is not the last. `NotFound` without the user turn. An event at a
        sequence already logged must equal the logged one (accepted, nothing rewritten); the
        first new one must come right after the last logged (the first of a turn is 1), and none
        may follow a logged terminal event: otherwise `Conflict`, with nothing written.
        """
        rules.text(account_id)
        await self._append_stream_events(account_id, stream_entries(events))

    async def prune_stream_events(self, finished_before: int, limit: int) -> int:
        """Operator sweep, every account: delete the whole log of at most `limit` turns that
        ended (phase marker `delivered` or `failed`) and whose terminal event is older than
        `finished_before` (its `at`); the number of turns pruned. A log without a terminal
        event, or of a turn still unfinished (a reply whose outcome is unknown), is kept."""
        return await self._prune_stream_events(rules.instant(finished_before), rules.limit(limit))

    @abstractmethod
    async def _ensure_conversation(
        self, account_id: str, conversation_id: str
    ) -> ConversationRecord: ...

    @abstractmethod
    async def _append_user_turn(self, record: UserTurnRecord) -> None: ...

    @abstractmethod
    async def _append_assistant_turn(
        self, account_id: str, turn: AssistantTurn, phase: TurnPhase | None
    ) -> None: ...

    @abstractmethod
    async def _set_phase(self, account_id: str, turn_id: str, phase: TurnPhase) -> PhaseMarker: ...

    @abstractmethod
    async def _append_stream_events(
        self, account_id: str, entries: tuple[StreamEntry, ...]
    ) -> None:
        """Judge with `stream_append` on the logged entries of `stream_window`."""

    @abstractmethod
    async def _prune_stream_events(self, finished_before: int, limit: int) -> int: ...


class ConversationStore(ConversationReader, ConversationWriter):
    """The whole conversations role: what a store implements (the hooks above)."""
