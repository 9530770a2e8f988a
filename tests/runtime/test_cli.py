"""The `turnframe` command: a refusal is one line on stderr and an exit code, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from turnframe_runtime.cli import main

#: `turnframe demo --db URL` in a process where psycopg cannot be imported.
WITHOUT_PSYCOPG = (
    "import sys\n"
    "sys.modules['psycopg'] = None\n"
    "sys.modules['psycopg_pool'] = None\n"
    "from turnframe_runtime.cli import main\n"
    "sys.exit(main(['demo', '--db', sys.argv[1]]))\n"
)


def test_the_demo_on_postgresql_without_the_extra_says_which_extra_to_install(
    tmp_path: Path,
) -> None:
    ran = subprocess.run(
        [sys.executable, "-c", WITHOUT_PSYCOPG, "postgresql+psycopg://u:secret@127.0.0.1/db"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )

    assert ran.returncode == 2
    assert ran.stdout == ""
    assert ran.stderr.count("\n") == 1, ran.stderr
    assert "pip install 'turnframe[postgres]'" in ran.stderr
    assert "Traceback" not in ran.stderr and "secret" not in ran.stderr


@pytest.mark.parametrize(
    "where",
    ["directory", "missing directory", "unknown scheme", "not a url"],
)
def test_a_bad_db_is_one_line_and_exit_code_2(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = {
        "directory": f"sqlite+aiosqlite:///{tmp_path}",
        "missing directory": f"sqlite+aiosqlite:///{tmp_path / 'nowhere' / 'demo.db'}",
        "unknown scheme": "mysql://root:secret@localhost/db",
        "not a url": "not a url",
    }[where]

    assert main(["demo", "--db", url]) == 2

    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err.startswith("turnframe demo: ") and printed.err.count("\n") == 1
    assert "secret" not in printed.err


def test_a_bad_db_path_exits_2_from_the_installed_command(tmp_path: Path) -> None:
    command = Path(sys.executable).parent / "turnframe"
    ran = subprocess.run(
        [command, "demo", "--db", f"sqlite+aiosqlite:///{tmp_path}"],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert ran.returncode == 2
    assert ran.stderr.count("\n") == 1 and "Traceback" not in ran.stderr


@pytest.mark.parametrize("command", ["worker", "recover"])
def test_an_app_that_cannot_be_loaded_is_one_line_and_exit_code_2(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'w.db'}"
    args = [command, "--db", url, "--app", "turnframe_test.no_such_module:factory"]
    if command == "worker":
        args += ["--broker", "stub://"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"turnframe {command}: cannot load turnframe_test.no_such_module:factory: "
        "No module named 'turnframe_test.no_such_module'"
    ]


def test_a_worker_given_a_broker_it_cannot_use_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'w.db'}"
    app = "turnframe_test.demo:recovery_runtime"
    assert main(["worker", "--db", url, "--app", app, "--broker", "carrier-pigeon://x"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("turnframe worker: ") and "carrier-pigeon" in line


@pytest.mark.parametrize("command", ["worker", "recover"])
def test_a_command_given_no_app_says_so_and_runs_nothing(
    command: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Neither runs the sample travel desk, or anything else, against the database it is
    handed unless told which runtime is yours."""
    monkeypatch.delenv("TURNFRAME_APP", raising=False)
    url = f"sqlite+aiosqlite:///{tmp_path / 'w.db'}"
    args = [command, "--db", url] + (["--broker", "stub://"] if command == "worker" else [])
    assert main(args) == 2
    assert capsys.readouterr().err.strip() == (
        f"turnframe {command}: --app MODULE:FACTORY (or TURNFRAME_APP) is needed"
    )
    assert not (tmp_path / "w.db").exists()
