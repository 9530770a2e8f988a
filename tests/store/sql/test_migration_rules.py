"""The rules every revision in migrations/versions keeps (docs/decisions/0004-sql-store.md, 8):
forward only (a downgrade does nothing but refuse), and a column added after the initial
revision is nullable, so a rolling deploy's older code can still insert rows."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

VERSIONS = Path(__file__).resolve().parents[3] / "migrations" / "versions"


def _revisions() -> list[Path]:
    return sorted(VERSIONS.glob("*.py"))


def _module(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _is_initial(module: ast.Module) -> bool:
    for node in module.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "down_revision" for target in node.targets
        ):
            return isinstance(node.value, ast.Constant) and node.value.value is None
    raise AssertionError("a revision names its down_revision")


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _true(value: ast.expr | None) -> bool:
    return isinstance(value, ast.Constant) and value.value is True


def _non_nullable_added_columns(module: ast.Module) -> list[int]:
    """Lines of `add_column(...)` calls (op. or a batch op) whose column is NOT NULL."""
    lines = []
    for node in ast.walk(module):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_column"
        ):
            continue
        columns = [a for a in node.args if isinstance(a, ast.Call)]
        column = _keyword(node, "column")
        if isinstance(column, ast.Call):
            columns.append(column)
        for call in columns:
            nullable = _keyword(call, "nullable")
            if (isinstance(nullable, ast.Constant) and nullable.value is False) or _true(
                _keyword(call, "primary_key")
            ):
                lines.append(node.lineno)
            elif nullable is not None and not isinstance(nullable, ast.Constant):
                lines.append(node.lineno)  # not provably nullable
    return lines


def _downgrade_only_refuses(module: ast.Module) -> bool:
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name == "downgrade":
            body = [
                statement
                for statement in node.body
                if not (
                    isinstance(statement, ast.Expr)
                    and isinstance(statement.value, ast.Constant)
                    and isinstance(statement.value.value, str)
                )
            ]
            return len(body) == 1 and isinstance(body[0], ast.Raise | ast.Pass)
    return True  # no downgrade at all offers none


def test_there_is_exactly_one_initial_revision() -> None:
    assert [path.name for path in _revisions() if _is_initial(_module(path))] == [
        "0001_tf_tables.py"
    ]


@pytest.mark.parametrize("path", _revisions(), ids=lambda path: path.name)
def test_a_revision_offers_no_downgrade(path: Path) -> None:
    assert _downgrade_only_refuses(_module(path)), f"{path.name}: downgrade() must only raise"


@pytest.mark.parametrize("path", _revisions(), ids=lambda path: path.name)
def test_a_column_added_after_the_initial_revision_is_nullable(path: Path) -> None:
    module = _module(path)
    if _is_initial(module):
        return
    assert _non_nullable_added_columns(module) == [], f"{path.name}: a NOT NULL column is added"


@pytest.mark.parametrize(
    ("source", "refused"),
    [
        ("op.add_column('t', sa.Column('c', sa.Text(), nullable=False))", True),
        ("batch.add_column(sa.Column('c', sa.Text(), nullable=False))", True),
        ("op.add_column('t', column=sa.Column('c', sa.Integer, primary_key=True))", True),
        ("op.add_column('t', sa.Column('c', sa.Text(), nullable=flag))", True),
        ("op.add_column('t', sa.Column('c', sa.Text()))", False),
        ("op.add_column('t', sa.Column('c', sa.Text(), nullable=True))", False),
    ],
)
def test_the_rule_recognises_a_non_nullable_column(source: str, refused: bool) -> None:
    assert bool(_non_nullable_added_columns(ast.parse(source))) is refused


@pytest.mark.parametrize(
    ("source", "refused"),
    [
        ("def downgrade():\n    op.drop_table('tf_turn')", True),
        ("def downgrade():\n    '''No.'''\n    op.drop_column('t', 'c')\n    raise X", True),
        ("def downgrade():\n    '''No.'''\n    raise NotImplementedError('forward only')", False),
        ("def downgrade():\n    pass", False),
    ],
)
def test_the_rule_recognises_a_downgrade_that_does_something(source: str, refused: bool) -> None:
    assert _downgrade_only_refuses(ast.parse(source)) is not refused
