"""Nothing outside a module touches its underscore names (STYLE): no `module._name` on a
turnframe module, no `from module import _name`, and no import from another package's private
module (`turnframe_core._x` from the store). A package's own private modules are its business.
Checked on the source (ast)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("turnframe_core", "turnframe_store", "turnframe_runtime", "turnframe_test")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(dotted: str, root: Path) -> bool:
    base = root.joinpath(*dotted.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _outside_private_module(module: str, importer: str) -> str | None:
    """The package whose private module `module` is, when `importer` is outside it."""
    segments = module.split(".")
    for index, segment in enumerate(segments):
        if _private(segment):
            owner = ".".join(segments[:index])
            inside = importer == owner or importer.startswith(owner + ".")
            return None if inside else owner
    return None


def private_reaches(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """Every place a module reaches another module's underscore names, as `path:line: what`."""
    found: list[str] = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            me = _module_name(path, root)
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            modules: set[str] = set()
            where = f"{path.relative_to(root)}"
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.name.startswith("turnframe_"):
                            modules.add(alias.asname or alias.name.split(".")[0])
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    if not node.module.startswith("turnframe_"):
                        continue
                    owner = _outside_private_module(node.module, me)
                    if owner is not None:
                        found.append(f"{where}:{node.lineno}: {node.module} is {owner}'s own")
                    for alias in node.names:
                        if _is_module(f"{node.module}.{alias.name}", root):
                            modules.add(alias.asname or alias.name)
                        elif _private(alias.name) and node.module != me:
                            found.append(f"{where}:{node.lineno}: {node.module}.{alias.name}")
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id in modules
                    and _private(node.attr)
                ):
                    found.append(f"{where}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_module_reaches_another_modules_underscore_names() -> None:
    assert private_reaches(ROOT) == []


def test_the_checker_reports_each_kind_of_reach(tmp_path: Path) -> None:
    core, store = tmp_path / "turnframe_core", tmp_path / "turnframe_store"
    for package in (core, store):
        package.mkdir()
        (package / "__init__.py").write_text("")
    (core / "_base.py").write_text("X = 1\n_Y = 2\n")
    (core / "user.py").write_text("from turnframe_core._base import X\n")  # its own: fine
    (store / "a.py").write_text("from turnframe_core._base import X\n")
    (store / "b.py").write_text("from turnframe_core.user import _hidden\n")
    (store / "c.py").write_text("from turnframe_core import user\nuser._hidden()\nuser.__doc__\n")
    found = private_reaches(tmp_path, ("turnframe_core", "turnframe_store"))
    assert found == [
        "turnframe_store/a.py:1: turnframe_core._base is turnframe_core's own",
        "turnframe_store/b.py:1: turnframe_core.user._hidden",
        "turnframe_store/c.py:2: user._hidden",
    ]
