"""The test kit's pytest plugin, loaded wherever turnframe is installed (entry point `pytest11`;
listing it in `pytest_plugins` as well is harmless). It gives:

- `store_backend` (needs pytest-asyncio): a test runs once per store backend, memory, SQLite
  and PostgreSQL, on fresh stores each time:

      async def test_my_workflow_commits_once(store_backend):   # runs three times
          stores = await store_backend.stores(clock=clock)      # migrated, removed afterwards

  The `postgres` case makes its schemas on the server `turnframe_postgres_url` names: by
  default `TURNFRAME_TEST_DATABASE_URL`; override that fixture to find a server another way.
  Without one the case is skipped with the reason printed, or fails when
  `TURNFRAME_REQUIRE_SERVICES=1`.
- the `gate(*numbers)` marker: the test is evidence for those release gates;
- `--turnframe-gates-select FILE` and `--turnframe-gates-report FILE`, which `turnframe gates`
  uses to choose and record the evidence it runs.

The suites adopters subclass (store and executor conformance, state exploration, crash
recovery at every fault point) live in `turnframe_test.suites`; docs/gates.md shows them.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from turnframe_test.backends import BACKENDS, Service, StoreBackend
from turnframe_test.gates_table import evidence_matches

__all__ = ["store_backend", "turnframe_postgres_url"]


@pytest.fixture
def turnframe_postgres_url() -> str:
    """The PostgreSQL server the `postgres` backend makes its schemas on."""
    given = os.environ.get("TURNFRAME_TEST_DATABASE_URL")
    return Service(given or None, "no PostgreSQL: TURNFRAME_TEST_DATABASE_URL is unset").use()


async def _store_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoreBackend]:
    """Fresh stores of one backend per call; all closed and removed after the test."""
    name: str = request.param
    server = request.getfixturevalue("turnframe_postgres_url") if name == "postgres" else None
    async with StoreBackend(name, tmp_path, server) as backend:
        yield backend


# An async fixture needs pytest-asyncio; without it, the rest of the plugin still loads (it is
# loaded in every pytest run where turnframe is installed).
if importlib.util.find_spec("pytest_asyncio") is not None:
    import pytest_asyncio

    store_backend = pytest_asyncio.fixture(params=BACKENDS, name="store_backend")(_store_backend)


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


def gate_marks(item: pytest.Item) -> list[int]:
    return sorted({int(n) for mark in item.iter_markers("gate") for n in mark.args})


_GATES_PROPERTY = "turnframe_gates"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Each test's gate marks travel with its reports (under pytest-xdist the session that
    # records them collects nothing itself).
    for item in items:
        marks = gate_marks(item)
        if marks:
            item.user_properties.append((_GATES_PROPERTY, marks))
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
    (every phase) and its gate marks, written when the session ends. Under pytest-xdist it runs
    in the controlling session, from the reports the workers send."""

    _RANK: ClassVar[dict[str, int]] = {"passed": 0, "skipped": 1, "failed": 2}  # others: failed

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
        for name, value in report.user_properties:
            if name == _GATES_PROPERTY and isinstance(value, list | tuple):
                test["gates"] = sorted({*test["gates"], *(int(n) for n in value)})
        test["seconds"] += report.duration
        outcome = report.outcome
        if outcome not in self._RANK:  # an outcome another plugin invented proves nothing
            outcome = "failed"
        if test["outcome"] == "not run" or self._RANK[outcome] > self._RANK[test["outcome"]]:
            test["outcome"] = outcome
        if report.failed:
            test["detail"] = f"{report.when}: {report.longreprtext.strip().splitlines()[-1:]}"
        elif report.skipped and isinstance(report.longrepr, tuple):
            test["detail"] = f"skipped: {report.longrepr[2]}"

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.path.write_text(json.dumps({"exit": int(exitstatus), "tests": self.tests}, indent=1))
