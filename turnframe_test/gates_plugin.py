"""The release gates' pytest plugin: how `turnframe gates` chooses and records its evidence.

It is not the adopters' plugin (`turnframe_test.pytest_plugin`, loaded wherever turnframe is
installed): it imports the gates table, which names this repository's tests, so it loads only
where asked for: this repository's tests/conftest.py lists it in `pytest_plugins`, and the pytest
session `turnframe gates` starts passes `-p turnframe_test.gates_plugin`. A suite of your own that
records its outcomes for `turnframe gates --tests-report FILE` loads it the same way:

    pytest -p turnframe_test.gates_plugin --turnframe-gates-report=FILE

It gives:

- `--turnframe-gates-select FILE`: run only the tests a JSON list of node ids names (a test id
  also selects its parametrizations) and the tests marked `gate`;
- `--turnframe-gates-report FILE`: write each test's outcome, seconds and gate marks as JSON;
- each test's `gate(*numbers)` marks carried with its reports (under pytest-xdist the session
  that records them collects nothing itself).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from turnframe_test.gates_table import evidence_matches

__all__ = ["GateRecorder", "gate_marks", "recorded_id"]


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
    report = config.getoption("turnframe_gates_report", default=None)
    if report:
        config.pluginmanager.register(GateRecorder(Path(report)), "turnframe-gate-recorder")


def gate_marks(item: pytest.Item) -> list[int]:
    return sorted({int(n) for mark in item.iter_markers("gate") for n in mark.args})


_GATES_PROPERTY = "turnframe_gates"


def recorded_id(nodeid: str) -> str:
    """A test's id as the gates table names it: without the `@group` suffix pytest-xdist's
    `--dist loadgroup` appends to the node id of a test marked `xdist_group` (an `@` inside a
    parametrization's brackets is the parameter's own)."""
    at = nodeid.rfind("@")
    return nodeid[:at] if at > nodeid.rfind("]") and at > nodeid.rfind("::") else nodeid


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
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
        tested = recorded_id(item.nodeid)
        named = files.get(tested.split("::", 1)[0], ())
        if gate_marks(item) or any(evidence_matches(e, tested) for e in named):
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
            self.tests[recorded_id(item.nodeid)] = {
                "outcome": "not run",
                "seconds": 0.0,
                "gates": gate_marks(item),
            }

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        test = self.tests.setdefault(
            recorded_id(report.nodeid), {"outcome": "not run", "seconds": 0.0, "gates": []}
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
