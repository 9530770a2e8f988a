"""`turnframe gates`: a gate is met only by evidence that held in this run; unproven is never
met; the command exits non-zero unless every gate is met; every piece of evidence the release
gates name exists."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from turnframe_test.gates import EvidenceResult, run_gates, verdict
from turnframe_test.gates_table import GATES, Gate, evidence_matches
from turnframe_test.process_chaos import PLANS

ROOT = Path(__file__).resolve().parents[2]


def _e(kind: str, outcome: str) -> EvidenceResult:
    return EvidenceResult(kind, "x", outcome)


def test_a_gate_is_met_only_when_every_piece_of_its_evidence_held() -> None:
    assert verdict([_e("test", "passed"), _e("doc", "passed")]) == "met"
    assert verdict([_e("run", "passed")]) == "met"
    assert verdict([_e("test", "passed"), _e("test", "failed")]) == "failed"
    assert verdict([_e("test", "passed"), _e("test", "skipped")]) == "unproven"
    assert verdict([_e("test", "passed"), _e("test", "missing")]) == "unproven"
    assert verdict([_e("test", "passed"), _e("doc", "missing")]) == "unproven"
    assert verdict([_e("doc", "passed")]) == "unproven"  # a document alone proves nothing
    assert verdict([]) == "unproven"


PROJECT_TESTS = """
import pytest

def test_holds():
    assert 1 + 1 == 2

@pytest.mark.parametrize("n", [1, 2])
def test_holds_twice(n):
    assert n > 0

@pytest.mark.parametrize("n", [1, 2])
def test_breaks_once(n):
    assert n == 1

def test_skipped():
    pytest.skip("no server")

@pytest.mark.gate(7)
def test_an_adopters_own_evidence():
    assert True

def test_not_named_anywhere():
    raise AssertionError("the runner must not run tests no gate names")
"""


def test_each_verdict_from_a_real_pytest_run(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_project.py").write_text(PROJECT_TESTS)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "rule.md").write_text("the rule")
    t = "tests/test_project.py::"
    gates = (
        Gate(1, "safety", "met by tests", tests=(t + "test_holds", t + "test_holds_twice")),
        Gate(2, "safety", "one parametrization fails", tests=(t + "test_breaks_once",)),
        Gate(3, "safety", "skipped evidence", tests=(t + "test_holds", t + "test_skipped")),
        Gate(4, "safety", "no evidence at all"),
        Gate(5, "safety", "a document alone", docs=("docs/rule.md",)),
        Gate(6, "safety", "a test that does not exist", tests=(t + "test_gone",)),
        Gate(7, "safety", "an adopter's marked test"),
        Gate(8, "safety", "a run that does not exist", runs=("no-such-run",)),
        Gate(9, "safety", "a missing document", tests=(t + "test_holds",), docs=("docs/x.md",)),
    )
    work = tmp_path / "work"
    work.mkdir()
    report = run_gates(
        root=tmp_path, gates=gates, database=None, broker=None, workdir=work, echo=False
    )
    verdicts = {r.gate.number: r.verdict for r in report.gates}
    assert verdicts == {
        1: "met",
        2: "failed",
        3: "unproven",
        4: "unproven",
        5: "unproven",
        6: "unproven",
        7: "met",
        8: "unproven",
        9: "unproven",
    }
    assert not report.met
    recorded = json.loads((work / "tests.json").read_text())["tests"]
    assert not any("test_not_named_anywhere" in nodeid for nodeid in recorded)
    (met,) = [r for r in report.gates if r.gate.number == 1]
    assert [e.detail for e in met.evidence] == ["1 run(s)", "2 run(s)"]
    table = report.table()
    assert "2 of 9 gates met" in table and "test_gone: missing" in table
    as_json = report.as_json()
    assert as_json["verdict"] == "not met"
    assert [g["verdict"] for g in as_json["gates"]] == list(verdicts.values())


def test_every_gate_of_the_reference_is_here_once_with_evidence_that_exists() -> None:
    assert [g.number for g in GATES] == list(range(1, 34))
    groups = [g.group for g in GATES]
    assert [groups.count(k) for k in ("safety", "workflow", "conversation", "provider")] == [
        10,
        6,
        7,
        5,
    ]
    assert groups.count("operational") == 5
    for gate in GATES:
        assert gate.tests or gate.runs, f"gate {gate.number} names no test and no run"
        for doc in gate.docs:
            assert (ROOT / doc).is_file(), f"gate {gate.number} names {doc}, which is missing"
        for run in gate.runs:
            assert run in PLANS, f"gate {gate.number} names the run {run}, which does not exist"
    wanted = sorted({t for g in GATES for t in g.tests})
    files = sorted({t.split("::")[0] for t in wanted})
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    for evidence in wanted:
        assert any(evidence_matches(evidence, c) for c in collected), f"no test {evidence}"


def test_an_unknown_gate_number_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(Path(sys.executable).parent / "turnframe"), "gates", "--gate", "34"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "no gate numbered 34" in done.stderr


@pytest.mark.slow
def test_the_command_exits_non_zero_when_a_gate_is_unproven(tmp_path: Path) -> None:
    """Run from a directory that holds none of the project's tests: every test of gate 1 is
    missing, so the gate is unproven and the command exits 1, writing its JSON."""
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "turnframe"),
            "gates",
            "--gate",
            "1",
            "--json",
            "g.json",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    written = json.loads((tmp_path / "g.json").read_text())
    assert written["verdict"] == "not met"
    assert written["gates"][0]["verdict"] == "unproven"
    assert "0 of 1 gates met" in done.stdout


def test_every_command_loads_without_pytest() -> None:
    """`turnframe worker`, `recover` and `replay` run where no test tool is installed: loading
    the gates command (an entry point, loaded with the others) must not import pytest."""
    script = (
        "import sys; sys.modules['pytest'] = None; sys.modules['_pytest'] = None\n"
        "from turnframe_runtime.cli import main\n"
        "raise SystemExit(main(['worker', '--help']))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "--broker" in done.stdout


def test_without_pytest_every_test_is_missing_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_project.py").write_text(PROJECT_TESTS)
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pytest" else real(name, *a)
    )
    gate = Gate(1, "safety", "met by tests", tests=("tests/test_project.py::test_holds",))
    report = run_gates(
        root=tmp_path, gates=(gate,), database=None, broker=None, workdir=tmp_path, echo=False
    )
    (evidence,) = report.gates[0].evidence
    assert (evidence.outcome, report.gates[0].verdict) == ("missing", "unproven")
    assert "pytest is not installed" in evidence.detail


def test_a_suites_recorded_outcomes_judge_the_gates_without_running_a_test_again(
    tmp_path: Path,
) -> None:
    """CI runs the suite once (on two processes) with `--turnframe-gates-report`; `turnframe
    gates --tests-report` judges from that record: the same verdicts as a run of its own, gate
    marks included, and no test runs twice."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_project.py").write_text(PROJECT_TESTS.replace(
        'raise AssertionError("the runner must not run tests no gate names")', "pass"
    ))  # fmt: skip
    recorded = tmp_path / "suite.json"
    suite = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests",
         "-p", "turnframe_test.gates_plugin",  # the release plugin, as the repository's conftest
         "-n", "2", f"--turnframe-gates-report={recorded}"],  # on two processes, as CI's
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert suite.returncode == 1, suite.stdout  # test_breaks_once[2] fails
    t = "tests/test_project.py::"
    gates = (
        Gate(1, "safety", "met by tests", tests=(t + "test_holds", t + "test_holds_twice")),
        Gate(2, "safety", "one parametrization fails", tests=(t + "test_breaks_once",)),
        Gate(3, "safety", "skipped evidence", tests=(t + "test_skipped",)),
        Gate(6, "safety", "a test the suite never ran", tests=(t + "test_gone",)),
        Gate(7, "safety", "an adopter's marked test"),
    )
    (tmp_path / "tests" / "test_project.py").write_text("raise SystemExit('not run again')")
    work = tmp_path / "work"
    work.mkdir()
    report = run_gates(
        root=tmp_path, gates=gates, database=None, broker=None, workdir=work, echo=False,
        tests_report=recorded,
    )  # fmt: skip
    verdicts = {r.gate.number: r.verdict for r in report.gates}
    assert verdicts == {1: "met", 2: "failed", 3: "unproven", 6: "unproven", 7: "met"}
    assert not (work / "tests.json").exists()  # no pytest session of its own
    unreadable = run_gates(
        root=tmp_path, gates=gates[:1], database=None, broker=None, workdir=work, echo=False,
        tests_report=tmp_path / "nothing.json",
    )  # fmt: skip
    assert unreadable.gates[0].verdict == "unproven"


GROUPED_TESTS = """
import pytest

pytestmark = pytest.mark.xdist_group("shared")

def test_alone():
    assert True

@pytest.mark.parametrize("who", ["a@b"])
def test_with_an_at(who):
    assert "@" in who
"""


def test_a_test_xdist_groups_is_recorded_under_the_id_the_gates_name(tmp_path: Path) -> None:
    """Under `--dist loadgroup` pytest-xdist appends `@group` to a grouped test's node id; the
    report keeps the id a gate names, so CI's grouped Redis tests still count as evidence."""
    (tmp_path / "test_grouped.py").write_text(GROUPED_TESTS)
    report = tmp_path / "tests.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-n", "2",
         "--dist", "loadgroup", "-p", "turnframe_test.gates_plugin",
         f"--turnframe-gates-report={report}"],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test_grouped.py::test_alone@shared" in done.stdout  # xdist did group them
    recorded = json.loads(report.read_text())["tests"]
    assert {nodeid: test["outcome"] for nodeid, test in recorded.items()} == {
        "test_grouped.py::test_alone": "passed",
        "test_grouped.py::test_with_an_at[a@b]": "passed",
    }
