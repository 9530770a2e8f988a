"""Case references: which record of which workflow, at which revision."""

from __future__ import annotations

from typing import Annotated

from pydantic import StringConstraints

from turnframe_core.model import FrozenModel, Revision

__all__ = ["CaseKey", "CaseRef", "CaseId", "RecordKind", "WorkflowKey"]

WorkflowKey = Annotated[
    str, StringConstraints(min_length=1, max_length=100, pattern=r"^[a-z][a-z0-9_.-]*$")
]
CaseId = Annotated[str, StringConstraints(min_length=1, max_length=200)]
#: a kind of record a user may name to reach its case ("booking_reference", "order_number")
RecordKind = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]


class CaseKey(FrozenModel):
    """A case without a revision: the identity of one record of one workflow."""

    workflow: WorkflowKey
    case_id: CaseId


class CaseRef(FrozenModel):
    """A case at an expected revision (0 = the case does not exist yet)."""

    workflow: WorkflowKey
    case_id: CaseId
    expected_revision: Revision

    @property
    def key(self) -> CaseKey:
        """The case without its revision: built once per reference, from fields that passed the
        same types (a turn asks a reference for its key about ten times)."""
        return self.cached(
            "key", lambda: CaseKey.from_valid(workflow=self.workflow, case_id=self.case_id)
        )

    def at(self, revision: int) -> CaseRef:
        return CaseRef(workflow=self.workflow, case_id=self.case_id, expected_revision=revision)
