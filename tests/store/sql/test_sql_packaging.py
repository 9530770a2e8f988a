"""The migrations reach every install: a wheel ships them inside the package, and `migrate()`
works from the installed wheel as it does from a source checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = {
    "turnframe_store/_migrations/env.py",
    "turnframe_store/_migrations/script.py.mako",
    "turnframe_store/_migrations/versions/0001_tf_tables.py",
    # server copy: templates and compiled catalogs (the runtime reads them at start)
    "turnframe_runtime/copy/templates/turnframe.notice.command_failed.j2",
    "turnframe_runtime/copy/locale/it/LC_MESSAGES/turnframe.mo",
    "turnframe_runtime/copy/locale/de/LC_MESSAGES/turnframe.mo",
    "turnframe_test/sample/travel_copy/templates/trip.name_set.title.j2",
    "turnframe_test/sample/travel_copy/locale/it/LC_MESSAGES/travel.mo",
    "turnframe_test/sample/travel_copy/locale/de/LC_MESSAGES/travel.mo",
    # the labelled narration corpus
    "turnframe_test/corpus/narration.jsonl",
    # `turnframe eval`: its report template and the sample domain's corpus
    "turnframe_runtime/eval_templates/report.html.j2",
    "turnframe_test/sample/eval_corpus.jsonl",
}


def test_every_package_directory_is_listed_for_the_wheel() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for root in ("turnframe_core", "turnframe_store", "turnframe_runtime", "turnframe_test")
        for init in (ROOT / root).rglob("__init__.py")
    }

    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"
    assert setuptools["package-dir"]["turnframe_store._migrations"] == "migrations"


@pytest.mark.slow
def test_an_installed_wheel_ships_the_migrations_and_migrates(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("migrations", "turnframe_core", "turnframe_store", "turnframe_runtime",
                 "turnframe_test"):  # fmt: skip
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", tmp_path / "dist", source], check=True)
    (wheel,) = (tmp_path / "dist").glob("turnframe-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    subprocess.run([*pip, "install", "--no-deps", "--target", tmp_path / "site", wheel], check=True)
    database = tmp_path / "installed.db"
    script = (
        "import asyncio, turnframe_store\n"
        "from turnframe_store import SqlStores\n"
        "async def main():\n"
        f"    stores = await SqlStores.connect('sqlite+aiosqlite:///{database}')\n"
        "    try:\n"
        "        await stores.migrate()\n"
        "        await stores.conversations.ensure_conversation('acct_1', 'conv_1')\n"
        "    finally:\n"
        "        await stores.aclose()\n"
        "    print(turnframe_store.__file__)\n"
        "    from turnframe_runtime import TemplateCopy\n"
        "    from turnframe_test.domains.travel import TRIP_COPY\n"
        "    copy = TemplateCopy(TRIP_COPY)\n"
        "    assert copy.missing(['en', 'it', 'de']) == [], copy.missing(['it', 'de'])\n"
        "    print(copy.render('turnframe.notice.command_failed', 'de', {}).text)\n"
        "asyncio.run(main())\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", script],
        env={"PYTHONPATH": str(tmp_path / "site")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )

    assert names >= SHIPPED
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().startswith(str(tmp_path / "site"))
    assert ran.stdout.strip().splitlines()[-1].startswith("Das")  # German, from the wheel
