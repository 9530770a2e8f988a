"""The dependency rules of DESIGN §2, checked on the source (ast), not on what happens to load."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("turnframe_core", "turnframe_store", "turnframe_runtime", "turnframe_test")
#: Third-party distributions each package may import (beyond stdlib and the turnframe packages
#: its rule allows).
THIRD_PARTY = {
    # orjson: canonical JSON's accelerator only (decision 0030; see the test below)
    "turnframe_core": {"pydantic", "pydantic_core", "typing_extensions", "orjson"},
    "turnframe_store": {
        "pydantic",
        "pydantic_core",
        "typing_extensions",
        "sqlmodel",
        "sqlalchemy",
        "psycopg",
        "psycopg_pool",
        "alembic",
        "aiosqlite",
    },
    "turnframe_runtime": None,  # any installed dependency
    "turnframe_test": None,
}
ALLOWED_TURNFRAME = {
    "turnframe_core": {"turnframe_core"},
    "turnframe_store": {"turnframe_core", "turnframe_store"},
    "turnframe_runtime": {"turnframe_core", "turnframe_store", "turnframe_runtime"},
    "turnframe_test": set(PACKAGES),
}
#: The runtime may use the store's protocols and errors, never a concrete store.
RUNTIME_STORE_MODULES = {
    "turnframe_store",
    "turnframe_store.protocols",
    "turnframe_store.errors",
    "turnframe_store.records",
    "turnframe_store.bundle",
    "turnframe_store.faults",
}
#: A command that assembles a process from a database URL alone (an auditor's `turnframe replay`
#: has no adopter app to build its stores) may open the SQL store: it is a composition root, and
#: nothing in the library imports it (decision 0016).
COMPOSITION_ROOTS = {
    "turnframe_runtime/cli_audit.py": {
        "turnframe_store.SqlStores",
        "turnframe_store.SqlConfig",
        "turnframe_store.InvalidDatabaseUrl",
        "turnframe_store.MissingExtra",
    },
    # `turnframe eval` migrates the fresh SQLite file it hands the adopter's factory.
    "turnframe_runtime/cli_eval.py": {"turnframe_store.SqlStores"},
}


#: Only the web layer may import the web framework: the rest of the runtime serves any app.
WEB_FRAMEWORK = {"starlette"}
WEB_LAYER = "turnframe_runtime/http/"


def imports_of(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.extend(
                (
                    f"{node.module}.{alias.name}"
                    if node.module == "turnframe_store"
                    else node.module,
                    node.lineno,
                )
                for alias in node.names
            )
    return found


def violations(package: str, root: Path = ROOT) -> list[str]:
    problems: list[str] = []
    for path in sorted((root / package).rglob("*.py")):
        for module, line in imports_of(path):
            top = module.split(".")[0]
            where = f"{path.relative_to(root)}:{line} imports {module}"
            if top.startswith("turnframe_"):
                if top not in ALLOWED_TURNFRAME[package]:
                    problems.append(where)
                elif package == "turnframe_runtime" and top == "turnframe_store":
                    base = module.rsplit(".", 1)[0] if module.count(".") > 1 else module
                    rooted = COMPOSITION_ROOTS.get(str(path.relative_to(root)), set())
                    if (
                        module not in RUNTIME_STORE_MODULES
                        and base not in RUNTIME_STORE_MODULES
                        and module not in rooted
                    ):
                        problems.append(where)
                continue
            if top in sys.stdlib_module_names or top == "__future__":
                continue
            if top in WEB_FRAMEWORK and not str(path.relative_to(root)).startswith(WEB_LAYER):
                problems.append(where)
                continue
            allowed = THIRD_PARTY[package]
            if allowed is not None and top not in allowed:
                problems.append(where)
    return problems


def test_core_imports_nothing_but_stdlib_and_pydantic():
    assert violations("turnframe_core") == []


def test_only_canonical_json_imports_its_accelerator():
    """Decision 0030: orjson is the one exception to core's "pydantic and stdlib", and only the
    canonical encoder, which checks it against the reference encoder, may use it."""
    users = sorted(
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if any(module.split(".")[0] == "orjson" for module, _ in imports_of(path))
    )
    assert users == ["turnframe_core/canonical.py"]


def test_the_store_imports_only_core():
    assert violations("turnframe_store") == []


def test_the_runtime_imports_core_and_the_store_protocols_only():
    assert violations("turnframe_runtime") == []


def test_nothing_in_the_runtime_imports_a_composition_root():
    roots = {Path(p).stem for p in COMPOSITION_ROOTS}
    importers = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "turnframe_runtime").rglob("*.py"))
        for module, line in imports_of(path)
        if module.rsplit(".", 1)[-1] in roots
    ]
    assert importers == []


def test_no_library_package_imports_the_test_kit():
    for package in ("turnframe_core", "turnframe_store", "turnframe_runtime"):
        assert not [v for v in violations(package) if "turnframe_test" in v]


def test_only_the_web_layer_imports_starlette():
    importers = [
        f"{path.relative_to(ROOT)}:{line}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for module, line in imports_of(path)
        if module.split(".")[0] in WEB_FRAMEWORK
    ]
    assert importers != []  # the rule below would hold vacuously otherwise
    assert [i for i in importers if not i.startswith(WEB_LAYER)] == []


def test_the_checker_reports_starlette_outside_the_web_layer(tmp_path):
    for where in ("turnframe_runtime/sse_app.py", "turnframe_runtime/http/app.py"):
        (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / where).write_text("from starlette.applications import Starlette\n")
    assert violations("turnframe_runtime", root=tmp_path) == [
        "turnframe_runtime/sse_app.py:1 imports starlette.applications"
    ]


def test_the_checker_reports_a_forbidden_import(tmp_path):
    bad = tmp_path / "turnframe_core"
    bad.mkdir()
    (bad / "leak.py").write_text(
        "import sqlalchemy\nfrom turnframe_runtime import x\nimport json\n"
    )
    found = violations("turnframe_core", root=tmp_path)
    assert found == [
        "turnframe_core/leak.py:1 imports sqlalchemy",
        "turnframe_core/leak.py:2 imports turnframe_runtime",
    ]
