"""Step G's lookup: a case found by a record the user names (a booking reference, an order
number), decision 0033.

Rules:
- A workflow declares the records a user may name (`Workflow.nameable`); the brief offers their
  kinds, and an understanding may name one (`NamedReference`). The model never looks anything
  up: the runtime does, here, before the turn is reduced.
- A reference whose form is not its record's is refused before any lookup
  (`turnframe.case_lookup.malformed_reference`).
- A conversation looks up at most `RuntimeConfig.lookups_per_conversation` references in any
  `lookup_window_ms`, counted in this process; one more is refused
  (`turnframe.case_lookup.rate_limited`) and reaches no directory.
- A lookup goes through `CaseDirectory.find`, scoped to the account, and every case it returns
  through `authorize` (`CaseBook.find`): another account's record and a record that does not
  exist both answer `turnframe.case_lookup.not_found`, with the same notice and nothing written.
- A found case is loaded and given a handle like a candidate; the brief shows its handle and
  label, nothing of its state.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from turnframe_core import codes
from turnframe_core.errors import TurnframeError
from turnframe_core.understanding import NamedReference, OfferedRecord
from turnframe_core.workflow import NameableRecord, Workflow
from turnframe_runtime.cases import CaseBook
from turnframe_runtime.context import NOTHING, Noticed, merge_notices, noticed
from turnframe_runtime.reduce import CaseInView

__all__ = [
    "CaseLookups",
    "CaseNotFound",
    "LookedUp",
    "LookupLimiter",
    "LookupRateLimited",
    "ReferenceMalformed",
]


class ReferenceMalformed(TurnframeError):
    """The reference does not have its record's form; nothing was looked up."""

    code = codes.CASE_LOOKUP_MALFORMED_REFERENCE


class LookupRateLimited(TurnframeError):
    """The conversation used up its lookups for now; nothing was looked up."""

    code = codes.CASE_LOOKUP_RATE_LIMITED


class CaseNotFound(TurnframeError):
    """No case this account may reach has that reference (none, or another account's)."""

    code = codes.CASE_LOOKUP_NOT_FOUND


class LookupLimiter:
    """At most `bound` lookups per (account, conversation) in any window of `window_ms`,
    counted in this process's memory (decision 0033)."""

    #: past this many conversations tracked, those with no lookup in the window are dropped
    _SWEEP_AT = 10_000

    def __init__(self, bound: int, window_ms: int) -> None:
        self._bound = bound
        self._window_ms = window_ms
        self._seen: dict[tuple[str, str], deque[int]] = {}

    def admit(self, account_id: str, conversation_id: str, now: int) -> bool:
        """Count one lookup at `now` (ms) and say whether it is within the bound; a refused
        lookup is not counted."""
        since = now - self._window_ms
        if len(self._seen) >= self._SWEEP_AT:
            self._seen = {k: v for k, v in self._seen.items() if v and v[-1] > since}
        times = self._seen.setdefault((account_id, conversation_id), deque())
        while times and times[0] <= since:
            times.popleft()
        if len(times) >= self._bound:
            return False
        times.append(now)
        return True


@dataclass(frozen=True)
class LookedUp:
    """What a turn's lookups came to: the cases found (each now has a handle) and a notice for
    each lookup that found none."""

    found: tuple[CaseInView, ...] = ()
    noticed: Noticed = NOTHING


class CaseLookups:
    """The records users may name, by kind, with the workflow of their cases, and the limiter
    their lookups share."""

    def __init__(self, records: Mapping[str, tuple[str, NameableRecord]], limiter: LookupLimiter):
        self._records = MappingProxyType(dict(records))
        self._limiter = limiter
        self.offered: tuple[OfferedRecord, ...] = tuple(
            OfferedRecord(record=kind, workflow=workflow)
            for kind, (workflow, _) in self._records.items()
        )

    @classmethod
    def build(cls, workflows: Iterable[Workflow], bound: int, window_ms: int) -> CaseLookups:
        """The records `workflows` declare; a kind declared twice is refused (a reference
        must name one workflow's cases)."""
        records: dict[str, tuple[str, NameableRecord]] = {}
        for workflow in workflows:
            for record in workflow.nameable():
                if record.record in records:
                    raise ValueError("a kind of nameable record is declared by one workflow")
                records[record.record] = (workflow.key, record)
        return cls(records, LookupLimiter(bound, window_ms))

    async def find(
        self,
        cases: CaseBook,
        account_id: str,
        conversation_id: str,
        named: NamedReference,
        now: int,
    ) -> tuple[CaseInView, ...]:
        """The cases `named` reaches in this account, loaded and with handles; else the typed
        refusal: `ReferenceMalformed`, `LookupRateLimited` or `CaseNotFound`."""
        declared = self._records.get(named.record)
        if declared is None or not declared[1].accepts(named.reference):
            raise ReferenceMalformed("the reference does not have the form of its record")
        if not self._limiter.admit(account_id, conversation_id, now):
            raise LookupRateLimited("this conversation looked up as many records as it may")
        found = await cases.find(declared[0], named.reference)
        if not found:
            raise CaseNotFound("no such record here")
        return tuple(found)

    async def look_up(
        self,
        cases: CaseBook,
        account_id: str,
        conversation_id: str,
        lookups: Sequence[NamedReference],
        now: int,
    ) -> LookedUp:
        """Every lookup of a turn, in order: the cases found, and a notice per refusal."""
        found: list[CaseInView] = []
        said = NOTHING
        for named in lookups:
            try:
                found.extend(await self.find(cases, account_id, conversation_id, named, now))
            except (ReferenceMalformed, LookupRateLimited, CaseNotFound) as refused:
                said += noticed(refused.code)
        return LookedUp(tuple(found), merge_notices(said))
