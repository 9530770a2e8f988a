"""`turnframe gates`: run the release gates and say, gate by gate, whether each is met.

Each gate (`turnframe_test.gates_table.GATES`) is met only when all of its evidence held in this
run: every test it names passed (each of its parametrizations; a skipped one proves nothing),
every run it names ended with no violation, every document it names exists. A gate with a
failure is `failed`; a gate with no test or run, or with evidence that was skipped, missing or
could not run, is `unproven`, never `met`. The command exits 0 only when every gate is met.

Tests run in one pytest session from the project's root (`--root`), with the release plugin
(`turnframe_test.gates_plugin`, loaded with `-p`) choosing them (`--turnframe-gates-select`)
and recording each outcome (`--turnframe-gates-report`). Tests under `--tests PATH` marked
`@pytest.mark.gate(N)` count as evidence for gate N too: that is how an adopter adds their own.
Runs are the real-process plans of `turnframe_test.process_chaos` against the PostgreSQL server
`--db` and the broker `--broker`.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Nothing here imports pytest: every `turnframe` command loads this module, and pytest is a
# test dependency. The tests run in a pytest subprocess.
from turnframe_test.gates_table import GATES, Gate, evidence_matches

__all__ = ["EvidenceResult", "GateResult", "GatesReport", "register", "run_gates", "verdict"]

LOCAL_POSTGRES = (
    "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    "postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
)
LOCAL_REDIS = "redis://127.0.0.1:6379/0"


@dataclass
class EvidenceResult:
    kind: str  # test | run | doc | marked
    name: str
    outcome: str  # passed | failed | skipped | missing | not run
    seconds: float = 0.0
    detail: str = ""


@dataclass
class GateResult:
    gate: Gate
    evidence: list[EvidenceResult] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return verdict(self.evidence)

    @property
    def seconds(self) -> float:
        return sum(e.seconds for e in self.evidence)

    def as_json(self) -> dict[str, Any]:
        return {
            "number": self.gate.number,
            "group": self.gate.group,
            "title": self.gate.title,
            "adapted": self.gate.adapted,
            "verdict": self.verdict,
            "seconds": round(self.seconds, 2),
            "evidence": [e.__dict__ for e in self.evidence],
        }


def verdict(evidence: list[EvidenceResult]) -> str:
    """`failed` when any evidence failed; `met` when there is a test or run (documents alone
    prove nothing) and every piece passed; else `unproven`."""
    if any(e.outcome == "failed" for e in evidence):
        return "failed"
    proving = [e for e in evidence if e.kind != "doc"]
    if proving and all(e.outcome == "passed" for e in evidence):
        return "met"
    return "unproven"


@dataclass
class GatesReport:
    gates: list[GateResult]
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    pytest_exit: int | None = None
    seconds: float = 0.0

    @property
    def met(self) -> bool:
        return bool(self.gates) and all(g.verdict == "met" for g in self.gates)

    def table(self) -> str:
        lines = [f"{'gate':<62} {'verdict':<9} {'evidence':<32} {'seconds':>8}"]
        lines.append("-" * len(lines[0]))
        for result in self.gates:
            gate = result.gate
            name = f"{gate.number:>2}{'*' if gate.adapted else ' '} {gate.title}"
            name = name if len(name) <= 62 else name[:61] + "…"
            lines.append(
                f"{name:<62} {result.verdict:<9} {_evidence_summary(result):<32} "
                f"{result.seconds:>8.1f}"
            )
        met = sum(1 for g in self.gates if g.verdict == "met")
        lines.append("-" * len(lines[0]))
        lines.append(f"{met} of {len(self.gates)} gates met in {self.seconds:.0f} s")
        lines.append("* adapted from the reference's wording (see the JSON or docs/gates.md)")
        for result in self.gates:
            if result.verdict == "met":
                continue
            for e in result.evidence:
                if e.outcome != "passed":
                    lines.append(f"  gate {result.gate.number}: {e.kind} {e.name}: {e.outcome}")
                    if e.detail:
                        lines.append(f"      {e.detail[:300]}")
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {
            "verdict": "met" if self.met else "not met",
            "seconds": round(self.seconds, 1),
            "pytest_exit": self.pytest_exit,
            "gates": [g.as_json() for g in self.gates],
            "runs": self.runs,
        }


def _evidence_summary(result: GateResult) -> str:
    parts = []
    for kind, label in (("test", "tests"), ("marked", "marked"), ("run", "runs"), ("doc", "docs")):
        of_kind = [e for e in result.evidence if e.kind == kind]
        if of_kind:
            passed = sum(1 for e in of_kind if e.outcome == "passed")
            parts.append(f"{passed}/{len(of_kind)} {label}")
    return ", ".join(parts) or "none"


# --- running ------------------------------------------------------------------------------------


def run_gates(
    *,
    root: Path,
    gates: tuple[Gate, ...] = GATES,
    extra_tests: tuple[str, ...] = (),
    database: str | None,
    broker: str | None,
    workdir: Path,
    pytest_args: tuple[str, ...] = (),
    echo: bool = True,
    tests_report: Path | None = None,
) -> GatesReport:
    """Run every piece of evidence the gates name, once, and judge each gate. With
    `tests_report` (what a pytest session recorded with `--turnframe-gates-report`), the tests'
    outcomes are read from it instead of running them again."""
    started = time.monotonic()
    if tests_report is not None:
        tests, exit_code, why = _recorded_tests(tests_report, echo)
    else:
        tests, exit_code, why = _run_tests(root, gates, extra_tests, workdir, pytest_args, echo)
    runs = _run_runs(gates, database, broker, workdir, echo)
    results = []
    for gate in gates:
        result = GateResult(gate)
        for evidence in gate.tests:
            result.evidence.append(_test_evidence(evidence, tests, why))
        for nodeid, test in sorted(tests.items()):
            if gate.number in test.get("gates", ()):
                result.evidence.append(
                    EvidenceResult(
                        "marked",
                        nodeid,
                        test["outcome"],
                        test["seconds"],
                        test.get("detail", ""),
                    )
                )
        for name in gate.runs:
            run = runs[name]
            result.evidence.append(
                EvidenceResult("run", name, run["outcome"], run.get("seconds", 0.0), run["detail"])
            )
        for doc in gate.docs:
            exists = (root / doc).is_file()
            result.evidence.append(EvidenceResult("doc", doc, "passed" if exists else "missing"))
        results.append(result)
    return GatesReport(
        results,
        {name: run.get("report", {}) for name, run in runs.items()},
        exit_code,
        time.monotonic() - started,
    )


def _test_evidence(evidence: str, tests: dict[str, dict[str, Any]], why: str) -> EvidenceResult:
    ran = [(nodeid, t) for nodeid, t in tests.items() if evidence_matches(evidence, nodeid)]
    if not ran:
        return EvidenceResult("test", evidence, "missing", detail=why)
    seconds = sum(t["seconds"] for _, t in ran)
    for wanted in ("failed", "not run", "skipped"):
        bad = [(n, t) for n, t in ran if t["outcome"] == wanted]
        if bad:
            nodeid, test = bad[0]
            detail = f"{nodeid}: {test.get('detail', wanted)}"
            return EvidenceResult("test", evidence, wanted, seconds, detail)
    return EvidenceResult("test", evidence, "passed", seconds, f"{len(ran)} run(s)")


def _run_tests(
    root: Path,
    gates: tuple[Gate, ...],
    extra_tests: tuple[str, ...],
    workdir: Path,
    pytest_args: tuple[str, ...],
    echo: bool,
) -> tuple[dict[str, dict[str, Any]], int | None, str]:
    """Each test's recorded outcome, pytest's exit status, and why a named test may be absent."""
    wanted = sorted({t for gate in gates for t in gate.tests})
    files = sorted({t.split("::", 1)[0] for t in wanted if (root / t.split("::", 1)[0]).is_file()})
    paths = files + list(extra_tests)
    if not paths:
        return {}, None, f"no such test under {root}"
    if importlib.util.find_spec("pytest") is None:
        why = "pytest is not installed, so no test ran (pip install 'turnframe[dev]')"
        if echo:
            print(f"turnframe gates: {why}")
        return {}, None, why
    select, report = workdir / "select.json", workdir / "tests.json"
    select.write_text(json.dumps(wanted))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *paths]
    command += ["-p", "turnframe_test.gates_plugin"]  # the adopters' plugin does not choose
    command += [f"--turnframe-gates-select={select}", f"--turnframe-gates-report={report}"]
    command += list(pytest_args)
    if echo:
        print(f"turnframe gates: pytest on {len(paths)} files ({len(wanted)} tests named)")
    log = workdir / "pytest.log"
    with log.open("wb") as out:
        finished = subprocess.run(command, cwd=root, stdout=out, stderr=subprocess.STDOUT)
    if echo:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:]
        print(f"turnframe gates: pytest exited {finished.returncode}: {' '.join(tail)}")
    if not report.is_file():
        return {}, finished.returncode, f"pytest exited {finished.returncode} before any test ran"
    recorded: dict[str, dict[str, Any]] = json.loads(report.read_text())["tests"]
    return recorded, finished.returncode, "no such test was collected"


def _recorded_tests(report: Path, echo: bool) -> tuple[dict[str, dict[str, Any]], int | None, str]:
    """The outcomes an earlier pytest session recorded (`--turnframe-gates-report`): a named
    test it did not run is missing, as in a run of our own."""
    try:
        recorded = json.loads(report.read_text())
        tests: dict[str, dict[str, Any]] = recorded["tests"]
        exit_code = int(recorded["exit"])
    except (OSError, ValueError, KeyError, TypeError) as unreadable:
        why = f"no test outcomes could be read from {report} ({type(unreadable).__name__})"
        if echo:
            print(f"turnframe gates: {why}")
        return {}, None, why
    if echo:
        print(
            f"turnframe gates: {len(tests)} test outcomes from {report} (pytest exited {exit_code})"
        )
    return tests, exit_code, f"the session that wrote {report} did not run it"


def _run_runs(
    gates: tuple[Gate, ...],
    database: str | None,
    broker: str | None,
    workdir: Path,
    echo: bool,
) -> dict[str, dict[str, Any]]:
    from turnframe_test.process_chaos import PLANS, run_plan

    names = sorted({name for gate in gates for name in gate.runs})
    runs: dict[str, dict[str, Any]] = {}
    for name in names:
        plan = PLANS.get(name)
        if plan is None:
            runs[name] = {"outcome": "missing", "detail": f"no run named {name}"}
            continue
        if database is None or broker is None:
            missing = "PostgreSQL" if database is None else "Redis"
            runs[name] = {"outcome": "skipped", "detail": f"no {missing} to run it against"}
            continue
        if echo:
            print(f"turnframe gates: run {name}")
        started = time.monotonic()
        try:
            report = asyncio.run(run_plan(plan, database, broker, workdir / name))
        except Exception as error:  # the run itself broke: the gate cannot be met by it
            runs[name] = {
                "outcome": "failed",
                "seconds": time.monotonic() - started,
                "detail": f"the run raised {type(error).__name__}: {error}",
            }
            continue
        if echo:
            print(report.summary())
        runs[name] = {
            "outcome": "passed" if report.passed else "failed",
            "seconds": report.seconds,
            "detail": "; ".join(report.violations[:3]),
            "report": report.as_json(),
        }
    return runs


# --- services -----------------------------------------------------------------------------------


def find_database() -> str | None:
    """`TURNFRAME_TEST_DATABASE_URL`, else a local PostgreSQL that lets us log in."""
    import psycopg

    from turnframe_store.sql.url import parse_url

    given = os.environ.get("TURNFRAME_TEST_DATABASE_URL")
    for url in (given,) if given else LOCAL_POSTGRES:
        try:
            with psycopg.connect(parse_url(url)[1], connect_timeout=3):
                return url
        except psycopg.Error:
            continue
    return None


def find_broker() -> str | None:
    """`TURNFRAME_TEST_REDIS_URL`, else a local Redis that answers."""
    import redis

    url = os.environ.get("TURNFRAME_TEST_REDIS_URL") or LOCAL_REDIS
    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.RedisError:
        return None
    return url


# --- the command --------------------------------------------------------------------------------


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "gates", help="run the release gates and print a gate-by-gate verdict"
    )
    parser.add_argument(
        "--root",
        metavar="DIR",
        default=".",
        help="the project's root: the gates' tests and documents are named from it (default .)",
    )
    parser.add_argument(
        "--tests",
        metavar="PATH",
        action="append",
        default=[],
        help="more tests to run; those marked @pytest.mark.gate(N) are evidence for gate N",
    )
    parser.add_argument(
        "--gate",
        metavar="N",
        type=int,
        action="append",
        default=[],
        help="judge only these gates (the exit status then speaks for them alone)",
    )
    parser.add_argument(
        "--tests-report",
        metavar="FILE",
        default=None,
        help="judge the tests from what a pytest session recorded with --turnframe-gates-report "
        "FILE (e.g. the suite CI just ran) instead of running them again",
    )
    parser.add_argument("--json", metavar="FILE", default="turnframe-gates.json")
    parser.add_argument(
        "--db",
        metavar="URL",
        default=None,
        help="the PostgreSQL server for the runs (default: $TURNFRAME_TEST_DATABASE_URL, "
        "else a local server)",
    )
    parser.add_argument(
        "--broker",
        metavar="URL",
        default=None,
        help="the Redis broker for the runs (default: $TURNFRAME_TEST_REDIS_URL, else "
        f"{LOCAL_REDIS})",
    )
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    root = Path(args.root).resolve()
    known = {gate.number for gate in GATES}
    unknown = sorted(set(args.gate) - known)
    if unknown:
        print(
            f"turnframe gates: no gate numbered {unknown[0]} (1 to {len(GATES)})", file=sys.stderr
        )
        return 2
    gates = tuple(g for g in GATES if not args.gate or g.number in args.gate)
    database = args.db or find_database()
    broker = args.broker or find_broker()
    workdir = Path(tempfile.mkdtemp(prefix="turnframe-gates-"))
    report = run_gates(
        root=root,
        gates=gates,
        extra_tests=tuple(args.tests),
        database=database,
        broker=broker,
        workdir=workdir,
        tests_report=Path(args.tests_report) if args.tests_report else None,
    )
    print(report.table())
    Path(args.json).write_text(json.dumps(report.as_json(), indent=2))
    print(f"turnframe gates: JSON in {args.json}, logs in {workdir}")
    return 0 if report.met else 1
