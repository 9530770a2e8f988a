"""Steps D, E and F: load the cases a turn may see, project their views, check the views'
invariants, and issue the opaque handles a model sees instead of ids.

Every case passes `CaseDirectory.authorize` before it is loaded; a case the account may not reach
is absent, exactly like one that does not exist.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping

from turnframe_core.cases import CaseKey, CaseRef
from turnframe_core.workflow import ViewInvariantViolation, Workflow, check_view
from turnframe_runtime.errors import UnknownWorkflow
from turnframe_runtime.ports import CaseDirectory
from turnframe_runtime.reduce import CaseInView

__all__ = ["CaseBook", "in_key_order", "workflow_for"]


def in_key_order(keys: Iterable[CaseKey]) -> list[CaseKey]:
    """Case keys by workflow, then case id: the order a turn lists its cases in."""
    return sorted(keys, key=lambda key: (key.workflow, key.case_id))


def workflow_for(workflows: Mapping[str, Workflow], key: str) -> Workflow:
    workflow = workflows.get(key)
    if workflow is None:
        raise UnknownWorkflow("a case names a workflow this runtime does not run")
    return workflow


class CaseBook:
    """The cases one turn has loaded (each once) and the handles it issued for them."""

    def __init__(
        self,
        directory: CaseDirectory,
        workflows: Mapping[str, Workflow],
        account_id: str,
    ) -> None:
        self._directory = directory
        self._workflows = workflows
        self._account_id = account_id
        self.cases: dict[CaseKey, CaseInView] = {}
        self.handles: dict[str, CaseInView] = {}

    def get(self, key: CaseKey) -> CaseInView | None:
        return self.cases.get(key)

    async def load(self, key: CaseKey, label: str | None = None) -> CaseInView | None:
        """The case as this turn sees it, or None when the account may not reach it."""
        if key in self.cases:
            return self.cases[key]
        if not await self._directory.authorize(self._account_id, key):
            return None
        workflow = workflow_for(self._workflows, key.workflow)
        loaded = await self._directory.load(self._account_id, key)
        case_ref = CaseRef(
            workflow=key.workflow, case_id=key.case_id, expected_revision=loaded.revision
        )
        view = workflow.project(case_ref, loaded.state)
        violations = check_view(view)
        if violations:
            raise ViewInvariantViolation(tuple(violations))
        in_view = CaseInView(
            case_ref=case_ref,
            label=label or view.label or key.case_id,
            state=loaded.state,
            view=view,
            workflow=workflow,
        )
        self.cases[key] = in_view
        return in_view

    async def find(self, workflow: str, name: str) -> list[CaseInView]:
        """The cases of `workflow` the directory finds by `name` that this account may reach,
        each loaded and given a handle (its own, when it had one). A case of another account
        is dropped by `authorize` exactly as if it had not been found."""
        found: list[CaseInView] = []
        for candidate in await self._directory.find(self._account_id, workflow, name):
            if candidate.case.workflow != workflow:
                continue
            in_view = await self.load(candidate.case, candidate.label)
            if in_view is None or any(f.case_ref.key == candidate.case for f in found):
                continue
            found.append(in_view)
            if all(c.case_ref.key != candidate.case for c in self.handles.values()):
                self.handles[f"h{len(self.handles) + 1}"] = in_view
        return found

    async def load_candidates(self, conversation_id: str) -> None:
        """Load the conversation's candidate cases and issue a handle for each (h1, h2, …)."""
        candidates = await self._directory.candidates(self._account_id, conversation_id)
        for candidate in candidates:
            in_view = await self.load(candidate.case, candidate.label)
            if in_view is not None:
                self.handles[f"h{len(self.handles) + 1}"] = in_view

    @contextlib.contextmanager
    def through(self, directory: CaseDirectory) -> Iterator[None]:
        """Loads in the block go through `directory` (a one-transaction turn reads its own
        writes, decision 0029)."""
        earlier, self._directory = self._directory, directory
        try:
            yield
        finally:
            self._directory = earlier

    async def refresh(self, key: CaseKey) -> CaseInView | None:
        """Load the case again (after a commit), keeping its label and its handle. Until the new
        load succeeds the case is absent: a failed refresh never leaves the old view standing."""
        earlier = self.cases.pop(key, None)
        case = await self.load(key, earlier.label if earlier is not None else None)
        if case is not None:
            for handle, old in list(self.handles.items()):
                if old.case_ref.key == key:
                    self.handles[handle] = case
        return case
