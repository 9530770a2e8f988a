"""`turnframe worker` processes a test starts and stops: the command on the test kit's desk app,
started with its output in a log file, stopped with SIGTERM and then, past a grace, SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

APP = "turnframe_test.outbox_app:desk_runtime"


def start_worker(
    url: str, broker: str, log: Path, env: dict[str, str], *options: str
) -> subprocess.Popen[bytes]:
    """`turnframe worker --db url --broker broker --app APP *options`, its output appended to
    `log`, with `env` over this process's environment."""
    command = [str(Path(sys.executable).parent / "turnframe"), "worker", "--db", url]
    command += ["--broker", broker, "--app", APP, *options]
    with log.open("ab") as written:
        return subprocess.Popen(command, env={**os.environ, **env}, stdout=written, stderr=written)


def stop_workers(workers: Sequence[subprocess.Popen[bytes]], grace_s: float = 15) -> None:
    """SIGTERM to every worker still running, then SIGKILL to one not gone within `grace_s`."""
    for worker in workers:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
    for worker in workers:
        try:
            worker.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            worker.kill()
