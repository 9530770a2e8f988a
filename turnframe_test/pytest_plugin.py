"""pytest fixtures that run a test once per store backend: memory, SQLite and PostgreSQL.

Enable it in a `conftest.py`:

    pytest_plugins = ("turnframe_test.pytest_plugin",)

    async def test_my_workflow_commits_once(store_backend):   # runs three times
        stores = await store_backend.stores(clock=clock)      # fresh, migrated, removed afterwards
        ...

The `postgres` case makes its schemas on the server `turnframe_postgres_url` names: by default
`TURNFRAME_TEST_DATABASE_URL`; override that fixture to find a server another way. Without one the
case is skipped with the reason printed, or fails when `TURNFRAME_REQUIRE_SERVICES=1`.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import pytest_asyncio

from turnframe_test.backends import BACKENDS, Service, StoreBackend

__all__ = ["store_backend", "turnframe_postgres_url"]


@pytest.fixture
def turnframe_postgres_url() -> str:
    """The PostgreSQL server the `postgres` backend makes its schemas on."""
    given = os.environ.get("TURNFRAME_TEST_DATABASE_URL")
    return Service(given or None, "no PostgreSQL: TURNFRAME_TEST_DATABASE_URL is unset").use()


@pytest_asyncio.fixture(params=BACKENDS)
async def store_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoreBackend]:
    """Fresh stores of one backend per call; all closed and removed after the test."""
    name: str = request.param
    server = request.getfixturevalue("turnframe_postgres_url") if name == "postgres" else None
    async with StoreBackend(name, tmp_path, server) as backend:
        yield backend


# --- release-gate evidence (`turnframe gates`) ------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("turnframe")
    group.addoption(
        "--turnframe-gates-select",
        metavar="FILE",
        default=None,
        help="run only the tests a JSON list of node ids names (a test id also selects its "
        "parametrizations) and the tests marked `gate`",
    )
    group.addoption(
        "--turnframe-gates-report",
        metavar="FILE",
        default=None,
        help="write each test's outcome, seconds and gate marks as JSON (for `turnframe gates`)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "gate(*numbers): the test is evidence for these release gates (`turnframe gates`)",
    )
    report = config.getoption("turnframe_gates_report", default=None)
    if report:
        config.pluginmanager.register(GateRecorder(Path(report)), "turnframe-gate-recorder")


def evidence_matches(evidence: str, nodeid: str) -> bool:
    """A test's node id names itself and each of its parametrizations."""
    return nodeid == evidence or nodeid.startswith(evidence + "[")


def gate_marks(item: pytest.Item) -> list[int]:
    return sorted({int(n) for mark in item.iter_markers("gate") for n in mark.args})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    select = config.getoption("turnframe_gates_select", default=None)
    if not select:
        return
    wanted = json.loads(Path(select).read_text())
    files: dict[str, list[str]] = {}
    for evidence in wanted:
        files.setdefault(evidence.split("::", 1)[0], []).append(evidence)
    kept, dropped = [], []
    for item in items:
        named = files.get(item.nodeid.split("::", 1)[0], ())
        if gate_marks(item) or any(evidence_matches(e, item.nodeid) for e in named):
            kept.append(item)
        else:
            dropped.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


class GateRecorder:
    """Each test's outcome (its worst phase: failed, then skipped, then passed), its seconds
    (every phase) and its gate marks, written when the session ends."""

    _RANK: ClassVar[dict[str, int]] = {"passed": 0, "skipped": 1, "failed": 2}

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tests: dict[str, dict[str, Any]] = {}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            self.tests[item.nodeid] = {
                "outcome": "not run",
                "seconds": 0.0,
                "gates": gate_marks(item),
            }

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        test = self.tests.setdefault(
            report.nodeid, {"outcome": "not run", "seconds": 0.0, "gates": []}
        )
        test["seconds"] += report.duration
        outcome = report.outcome
        if test["outcome"] == "not run" or self._RANK[outcome] > self._RANK[test["outcome"]]:
            test["outcome"] = outcome
        if report.failed:
            test["detail"] = f"{report.when}: {report.longreprtext.strip().splitlines()[-1:]}"
        elif report.skipped and isinstance(report.longrepr, tuple):
            test["detail"] = f"skipped: {report.longrepr[2]}"

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.path.write_text(json.dumps({"exit": int(exitstatus), "tests": self.tests}, indent=1))
