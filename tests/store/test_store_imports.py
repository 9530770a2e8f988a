"""What importing the store costs: the SQL stack loads only when the SQL store is used."""

from __future__ import annotations

import json
import subprocess
import sys

SQL_STACK = ("sqlalchemy", "sqlmodel", "alembic")


def _sql_stack_loaded_by(statement: str) -> list[str]:
    """The SQL stack's top-level modules a fresh interpreter holds after `statement`."""
    probe = (
        f"import json, sys\n{statement}\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(SQL_STACK)!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded: list[str] = json.loads(done.stdout)
    return loaded


def test_importing_the_store_package_loads_no_sql_stack() -> None:
    assert _sql_stack_loaded_by("import turnframe_store") == []


def test_memory_stores_sql_config_and_the_conformance_suite_load_no_sql_stack() -> None:
    statement = (
        "from turnframe_store import MemoryStores, SqlConfig\nimport turnframe_store.conformance"
    )

    assert _sql_stack_loaded_by(statement) == []


def test_sql_stores_is_still_imported_from_the_package() -> None:
    import turnframe_store
    import turnframe_store.sql.stores

    assert turnframe_store.SqlStores is turnframe_store.sql.stores.SqlStores
    assert "sqlalchemy" in _sql_stack_loaded_by("from turnframe_store import SqlStores")
