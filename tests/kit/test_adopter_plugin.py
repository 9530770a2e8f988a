"""An adopter's pytest run, in a project of their own: the installed plugin gives the store
backends and the `gate` marker, and loads none of this repository's release machinery (the
gates table names this repository's tests; the process-chaos runs and the turn server are its
release runs), nor the sample domain."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: An adopter's pytest run: this checkout's kit, wherever installed, and none of the options the
#: run hosting this test was given (CI's `--turnframe-gates-report` is not an adopter's option).
ADOPTER_ENV = {
    **{name: value for name, value in os.environ.items() if name != "PYTEST_ADDOPTS"},
    "PYTHONPATH": str(ROOT),
}

#: Modules only this repository's release uses.
RELEASE_MODULES = (
    "turnframe_test.gates",
    "turnframe_test.gates_plugin",
    "turnframe_test.gates_table",
    "turnframe_test.process_chaos",
    "turnframe_test.turn_server",
    "turnframe_test.chaos_checks",
    "turnframe_test.outbox_app",
)

ADOPTER_TESTS = f"""
import sys

import pytest

RELEASE_MODULES = {RELEASE_MODULES!r}


@pytest.mark.gate(7)
async def test_my_stores(store_backend):
    stores = await store_backend.stores()
    assert stores is not None


def test_the_run_loaded_the_adopters_plugin_and_no_release_machinery(pytestconfig):
    assert pytestconfig.pluginmanager.has_plugin("turnframe_test.pytest_plugin")
    assert [name for name in RELEASE_MODULES if name in sys.modules] == []
    assert "turnframe_test.sample" not in sys.modules  # nor the sample domain
"""


def test_an_adopters_pytest_run_loads_no_release_machinery(tmp_path: Path) -> None:
    (tmp_path / "test_mine.py").write_text(ADOPTER_TESTS)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--strict-markers",
         "-k", "memory or release", "-o", "asyncio_mode=auto"],
        cwd=tmp_path, capture_output=True, text=True,
        env=ADOPTER_ENV,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout, done.stdout


def test_the_release_options_are_not_the_adopters(tmp_path: Path) -> None:
    """`--turnframe-gates-report` is the release plugin's: an adopter's run loads it by name."""
    (tmp_path / "test_mine.py").write_text("def test_holds():\n    assert True\n")
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    env = ADOPTER_ENV
    report = tmp_path / "report.json"
    plain = subprocess.run(
        [*run, f"--turnframe-gates-report={report}"],
        cwd=tmp_path, capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert plain.returncode != 0 and not report.exists()
    asked = subprocess.run(
        [*run, "-p", "turnframe_test.gates_plugin", f"--turnframe-gates-report={report}"],
        cwd=tmp_path, capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert asked.returncode == 0, asked.stdout + asked.stderr
    assert '"test_mine.py::test_holds"' in report.read_text()
