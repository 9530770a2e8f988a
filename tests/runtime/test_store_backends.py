"""Every runtime test that touches stores runs on memory, SQLite and PostgreSQL: its harness comes
from the `desk` / `make_desk` fixtures (tests/conftest.py), never built by hand."""

from __future__ import annotations

import ast
from pathlib import Path

from turnframe_store import MemoryStores, SqlStores

HERE = Path(__file__).resolve().parent
#: What a runtime test may not build itself: it would run on one backend only.
BUILT_BY_FIXTURES = {"DeskHarness", "MemoryStores", "SqlStores", "TurnRuntime"}
#: Tests that build one anyway, and why that needs no backend.
STORE_FREE = {
    "test_the_runtime_refuses_to_start_naming_every_missing_message": (
        "the runtime refuses in its constructor, before any store is used"
    ),
    "test_a_runtime_refuses_two_origins_of_one_name": (
        "the harness refuses its origins in its constructor, before any store is used"
    ),
}
DIALECT = {"memory": None, "sqlite": "sqlite", "postgres": "postgresql"}


async def test_a_desk_runs_on_its_backends_stores_and_shares_their_clock(store_backend, desk):
    expected = MemoryStores if store_backend.name == "memory" else SqlStores
    assert type(desk.stores) is expected
    assert getattr(desk.stores, "dialect", None) == DIALECT[store_backend.name]
    assert desk.stores.clock is desk.clock


def _builds(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id in BUILT_BY_FIXTURES
    return isinstance(func, ast.Attribute) and _named(func.value) in BUILT_BY_FIXTURES - {
        "DeskHarness"  # DeskHarness.on(backend) is how the fixtures build it
    }


def _named(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def _built_by_hand(path: Path) -> list[str]:
    found = []
    for test in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(test, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if test.name.startswith("test_") and test.name not in STORE_FREE:
            calls = [n for n in ast.walk(test) if isinstance(n, ast.Call) and _builds(n)]
            found.extend(f"{path.name}:{call.lineno} in {test.name}" for call in calls)
    return found


def test_no_runtime_test_builds_its_own_harness_or_stores():
    built = [hit for path in sorted(HERE.glob("test_*.py")) for hit in _built_by_hand(path)]
    assert built == []
