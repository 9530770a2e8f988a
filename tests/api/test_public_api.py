"""The public API an adopter lives in: package tops only, nothing heavy loaded by importing them,
and a runtime whose collaborators cannot be swapped after construction."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import turnframe_core
import turnframe_runtime
import turnframe_store
import turnframe_test

ROOT = Path(__file__).resolve().parents[2]
LIBRARIES = ("turnframe_core", "turnframe_store", "turnframe_runtime")
SQL_STACK = {"sqlalchemy", "sqlmodel", "alembic"}
#: What an adopter writes a workflow, an interpreter, cards and facts with.
ADOPTER_NAMES = (
    "ArgumentSpec", "AmbiguousTarget", "ApplyOperation", "CardTarget", "CompiledCommand",
    "ConfirmCommands", "ConfirmationPolicy", "Constraint", "ConstraintKind", "DeclineAndRecord",
    "DomainRefusal", "Evidence", "ExternalSaga", "HandleTarget", "InteractionRequirement",
    "NextStep", "Obligation", "OperationSpec", "OperationalOutcome", "OptionStyle", "PerCase",
    "PhaseOwnership", "ProposedAct", "Question", "ResolvedAct", "RiskClass", "Understanding",
    "WorkflowDefinition", "WorkflowView",
)  # fmt: skip


def test_importing_the_library_packages_loads_no_sql_stack() -> None:
    probe = (
        "import json, sys\nimport turnframe_core, turnframe_store, turnframe_runtime\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert set(json.loads(done.stdout)) & SQL_STACK == set()


def test_every_name_an_adopter_needs_is_exported_from_the_core() -> None:
    missing = [name for name in ADOPTER_NAMES if name not in turnframe_core.__all__]
    assert missing == []


@pytest.mark.parametrize("package", [turnframe_core, turnframe_store, turnframe_runtime])
def test_every_exported_name_exists(package: object) -> None:
    assert [n for n in package.__all__ if not hasattr(package, n)] == []  # type: ignore[attr-defined]


def test_plumbing_is_not_part_of_the_core_api() -> None:
    plumbing = [n for n in turnframe_core.__all__ if re.fullmatch(r"derive_(?!id$)\w+", n)]
    assert plumbing == []
    assert "canonical_bytes" not in turnframe_core.__all__


def test_the_test_kit_exports_the_harness_and_the_scripted_ports() -> None:
    for name in ("DeskHarness", "ScriptedInterpreter", "ScriptedNarrator", "StoreBackend"):
        assert name in turnframe_test.__all__


def _imported_modules(source: str) -> list[str]:
    modules = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules.append(node.module)
        elif isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names)
    return modules


def test_the_guide_and_the_sample_domain_import_only_from_package_tops() -> None:
    guide = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
    code = "\n".join(re.findall(r"```python\n(.*?)```", guide, flags=re.S))
    code += (ROOT / "turnframe_test" / "domains" / "travel.py").read_text(encoding="utf-8")
    deep = [m for m in _imported_modules(code) if m.split(".")[0] in LIBRARIES and "." in m]
    assert deep == []


def test_the_runtime_refuses_stores_whose_calls_cannot_commit_together() -> None:
    from turnframe_runtime import StoresWithoutTransactions, TurnRuntime
    from turnframe_store import ROLES, MemoryStores, Stores
    from turnframe_test.domains.travel import TripDesk, TripDirectory, TripExecutor, TripWorkflow

    memory = MemoryStores()
    plain = Stores(**{role: getattr(memory, role) for role, _ in ROLES})
    desk = TripDesk()
    with pytest.raises(StoresWithoutTransactions):
        TurnRuntime(
            stores=plain,
            workflows=[TripWorkflow()],
            directory=TripDirectory(desk),
            executor=TripExecutor(desk),
        )
