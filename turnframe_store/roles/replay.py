"""The replay records role and the audit chain: its contract and the judges its stores apply."""

from __future__ import annotations

from abc import ABC, abstractmethod

from turnframe_core.audit_chain import ChainLink
from turnframe_core.derive import derive_replay_token
from turnframe_core.replay import ReplayRecord
from turnframe_store.errors import Conflict, InvalidRecord
from turnframe_store.roles import rules
from turnframe_store.roles.conversations import TERMINAL_PHASES
from turnframe_store.roles.rules import Role, Verdict


def derived_token(record: ReplayRecord) -> None:
    if record.replay_token != derive_replay_token(record.turn_id):
        raise InvalidRecord("the replay token is not derived from the turn id")


def put_replay(stored: ReplayRecord, record: ReplayRecord) -> Verdict:
    """Upsert until the stored phase is terminal; then only the identical record is accepted."""
    if stored == record:
        return Verdict.REPEAT
    if stored.conversation_id != record.conversation_id:
        raise Conflict("the turn's replay record belongs to another conversation")
    if stored.phase in TERMINAL_PHASES:
        raise Conflict("the turn's replay record is final")
    return Verdict.MOVE


class ReplayReader(Role, ABC):
    """The reading half of the replay role."""

    async def get(self, account_id: str, turn_id: str) -> ReplayRecord:
        """The turn's replay record, or `NotFound`."""
        rules.text(account_id, turn_id)
        return await self._get(account_id, turn_id)

    async def get_by_token(self, account_id: str, replay_token: str) -> ReplayRecord:
        """The record a replay token names, or `NotFound`."""
        rules.text(account_id, replay_token)
        return await self._get_by_token(account_id, replay_token)

    async def for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[ReplayRecord, ...]:
        """The conversation's records sorted by (recorded_at of each turn's first put, turn_id):
        oldest turn first, as `verify_chain` reads them."""
        rules.text(account_id, conversation_id)
        return await self._for_conversation(account_id, conversation_id)

    async def last_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> ReplayRecord | None:
        """The last record in `for_conversation`'s order (the one a new turn chains to), or
        None; it reads one record, however long the conversation."""
        rules.text(account_id, conversation_id)
        return await self._last_for_conversation(account_id, conversation_id)

    async def chain(self, account_id: str, conversation_id: str) -> tuple[ChainLink, ...]:
        """The conversation's audit chain in position order: one link per final record, appended
        when the record became final and never changed."""
        rules.text(account_id, conversation_id)
        return await self._chain(account_id, conversation_id)

    async def accounts_with_token(self, replay_token: str) -> tuple[str, ...]:
        """Every account holding a record of `replay_token` (an auditor may know only the
        token), sorted."""
        rules.text(replay_token)
        return await self._accounts_with_token(replay_token)

    async def accounts_with_conversation(self, conversation_id: str) -> tuple[str, ...]:
        """Every account holding records of a conversation with this id, sorted."""
        rules.text(conversation_id)
        return await self._accounts_with_conversation(conversation_id)

    async def unerased_before(self, before: int, limit: int) -> tuple[tuple[str, str], ...]:
        """Operator sweep, every account (the retention sweep, decision 0032): the (account,
        turn) of at most `limit` final records recorded before `before` whose turn still holds
        words (no erasure left it with none): turns never erased first, then turns erased
        before that still keep words (a card open, a command not run); each oldest first, then
        by account and turn."""
        return await self._unerased_before(rules.instant(before), rules.limit(limit))

    @abstractmethod
    async def _unerased_before(self, before: int, limit: int) -> tuple[tuple[str, str], ...]: ...

    @abstractmethod
    async def _get(self, account_id: str, turn_id: str) -> ReplayRecord: ...

    @abstractmethod
    async def _get_by_token(self, account_id: str, replay_token: str) -> ReplayRecord: ...

    @abstractmethod
    async def _for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[ReplayRecord, ...]: ...

    @abstractmethod
    async def _last_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> ReplayRecord | None: ...

    @abstractmethod
    async def _chain(self, account_id: str, conversation_id: str) -> tuple[ChainLink, ...]: ...

    @abstractmethod
    async def _accounts_with_token(self, replay_token: str) -> tuple[str, ...]: ...

    @abstractmethod
    async def _accounts_with_conversation(self, conversation_id: str) -> tuple[str, ...]: ...


class ReplayWriter(Role, ABC):
    """The writing half of the replay role."""

    async def put(self, record: ReplayRecord) -> None:
        """Upsert the turn's record. Once the stored phase is terminal only an identical record
        is accepted (else `Conflict`); the replay token must be derived from the turn id. The
        write that makes a record final (`delivered` or `failed`) also appends its `ChainLink`
        to the conversation's chain, once."""
        await self._put(record)

    @abstractmethod
    async def _put(self, record: ReplayRecord) -> None:
        """Judge with `derived_token` and `put_replay`, then upsert."""


class ReplayStore(ReplayReader, ReplayWriter):
    """The whole replay role: what a store implements (the hooks above)."""
