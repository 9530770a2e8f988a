"""The command journal role: its contract and the judges its stores apply; the status sets come
from `JournalStatus.can_move_to`.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from typing import Final

from turnframe_core.replay import CommandOutcome
from turnframe_store.errors import Conflict, InvalidRecord
from turnframe_store.faults import FaultPoint
from turnframe_store.records import (
    Fresh,
    JournalAdmission,
    JournalEntry,
    JournalStatus,
    Replay,
)
from turnframe_store.roles import rules
from turnframe_store.roles.rules import Role, Verdict


@functools.cache
def journal_sources(target: JournalStatus) -> frozenset[JournalStatus]:
    """The statuses an entry may leave for `target` (the journal's status machine)."""
    return frozenset(status for status in JournalStatus if status.can_move_to(target))


UNSETTLED_JOURNAL: Final = frozenset(status for status in JournalStatus if status.is_unsettled)


#: An entry is admitted before it runs: in a status that may still start executing.
ADMISSIBLE_JOURNAL: Final = journal_sources(JournalStatus.EXECUTING)


#: Where an executing command may end: the statuses an outcome settles an entry into.
JOURNAL_SETTLEMENTS: Final = frozenset(
    status for status in JournalStatus if JournalStatus.EXECUTING.can_move_to(status)
)


def admissible(entry: JournalEntry) -> None:
    if entry.status not in ADMISSIBLE_JOURNAL:
        raise InvalidRecord("a journal entry is admitted pending or awaiting confirmation")


def readmit(stored: JournalEntry, entry: JournalEntry) -> Replay:
    """`entry` under a stored idempotency key: the stored entry again when it is the same
    command (whatever its command id), else `Conflict`."""
    if not stored.same_command(entry):
        raise Conflict("the idempotency key was used for another command")
    return Replay(entry=stored)


def command_id_taken() -> Conflict:
    return Conflict("the command id is stored under another idempotency key")


def start(entry: JournalEntry) -> Verdict:
    if entry.status is JournalStatus.EXECUTING:
        return Verdict.REPEAT
    if entry.status not in journal_sources(JournalStatus.EXECUTING):
        raise Conflict(f"a {entry.status.value} command does not start executing")
    return Verdict.MOVE


def settles(outcome: CommandOutcome) -> JournalStatus:
    """The status `outcome` settles an entry into; an outcome that settles nothing is refused."""
    target = JournalStatus.for_outcome(outcome)
    if target not in JOURNAL_SETTLEMENTS:
        raise InvalidRecord("this outcome does not settle a command")
    return target


def complete(entry: JournalEntry, outcome: CommandOutcome) -> Verdict:
    """Record `outcome` along the status machine; the same outcome again is a repeat."""
    target = JournalStatus.for_outcome(outcome)
    if entry.status is target and entry.outcome == outcome:
        return Verdict.REPEAT
    if entry.status not in journal_sources(target):
        raise Conflict(f"a {entry.status.value} command cannot be settled this way")
    return Verdict.MOVE


class CommandJournalReader(Role, ABC):
    """The reading half of the journal role."""

    async def get(self, account_id: str, command_id: str) -> JournalEntry:
        """The entry, or `NotFound`."""
        rules.text(account_id, command_id)
        return await self._get(account_id, command_id)

    async def get_by_key(self, account_id: str, idempotency_key: str) -> JournalEntry:
        """The entry admitted under this key, or `NotFound`."""
        rules.text(account_id, idempotency_key)
        return await self._get_by_key(account_id, idempotency_key)

    async def for_turn(self, account_id: str, turn_id: str) -> tuple[JournalEntry, ...]:
        """The turn's entries, sorted by (created_at, command_id)."""
        rules.text(account_id, turn_id)
        return await self._for_turn(account_id, turn_id, unsettled=False)

    async def unsettled_for_turn(self, account_id: str, turn_id: str) -> tuple[JournalEntry, ...]:
        """The turn's pending, executing and outcome-unknown entries, sorted by
        (created_at, command_id)."""
        rules.text(account_id, turn_id)
        return await self._for_turn(account_id, turn_id, unsettled=True)

    @abstractmethod
    async def _get(self, account_id: str, command_id: str) -> JournalEntry: ...

    @abstractmethod
    async def _get_by_key(self, account_id: str, idempotency_key: str) -> JournalEntry: ...

    @abstractmethod
    async def _for_turn(
        self, account_id: str, turn_id: str, *, unsettled: bool
    ) -> tuple[JournalEntry, ...]:
        """The turn's entries (only the `UNSETTLED_JOURNAL` ones when `unsettled`)."""


class CommandJournalWriter(Role, ABC):
    """The writing half of the journal role."""

    async def begin(self, entry: JournalEntry) -> JournalAdmission:
        """Admit a pending or awaiting-confirmation entry: exactly one `Fresh` per
        (account, idempotency key), ever; later callers get `Replay(stored entry)`.

        The same key with a different command (case_ref, command_type, payload) is `Conflict`, and
        so is a command id already stored under another key.
        """
        rules.record_keys(entry)
        admissible(entry)
        self._faults.reach(FaultPoint.BEFORE_JOURNAL_INSERT)
        admission = await self._begin(entry)
        if isinstance(admission, Fresh):
            self._faults.reach(FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT)
        return admission

    async def mark_executing(self, account_id: str, command_id: str) -> JournalEntry:
        """pending | awaiting_confirmation -> executing; executing again is accepted."""
        rules.text(account_id, command_id)
        return await self._mark_executing(account_id, command_id)

    async def complete(
        self, account_id: str, command_id: str, outcome: CommandOutcome
    ) -> JournalEntry:
        """Record the outcome along the journal's status machine. The same outcome again is
        accepted; a different one is `Conflict`."""
        rules.text(account_id, command_id)
        settles(outcome)
        return await self._complete(account_id, command_id, outcome)

    @abstractmethod
    async def _begin(self, entry: JournalEntry) -> JournalAdmission: ...

    @abstractmethod
    async def _mark_executing(self, account_id: str, command_id: str) -> JournalEntry: ...

    @abstractmethod
    async def _complete(
        self, account_id: str, command_id: str, outcome: CommandOutcome
    ) -> JournalEntry: ...


class CommandJournal(CommandJournalReader, CommandJournalWriter):
    """The whole journal role: what a store implements (the hooks above)."""
