"""The fault points fire on SqlStores exactly where they fire on MemoryStores, and leave the same:
the same checks as tests/store/test_fault_points.py, run on SQLite and PostgreSQL."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from services import Databases

from turnframe_store import FaultPoint, ManualClock

FAULTS_FILE = Path(__file__).resolve().parents[1] / "test_fault_points.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fault_points_on_sql", FAULTS_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FAULTS = _module()
CHECKS: list[tuple[str, dict[str, Any]]] = [
    *(
        ("test_every_fault_point_leaves_exactly_what_its_name_says", {"point": point})
        for point in FaultPoint
    ),
    *(
        ("test_after_outbox_dispatch_keeps_the_row_dispatching_whatever_the_result", {"settle": s})
        for s in ("mark_completed", "mark_failed", "mark_outcome_unknown")
    ),
    ("test_after_interaction_persistence_leaves_a_replacement_visible", {}),
    *(
        ("test_a_fault_inside_a_bundle_leaves_nothing_of_it", {"point": point})
        for point in FAULTS.BUNDLE_POINTS
    ),
    ("test_a_bundle_aborted_by_a_fault_can_be_committed_afterwards", {}),
    ("test_the_read_back_point_lets_a_bundle_land_and_then_fails_the_call", {}),
    ("test_the_read_back_point_fails_a_transaction_after_its_commit", {}),
    *(
        (
            "test_a_bundle_point_waits_for_a_bundle_whose_stage_writes_something",
            dict(zip(("point", "emptied"), case, strict=True)),
        )
        for case in (
            (FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT, "journal_completions"),
            (FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK, "events"),
            (FaultPoint.AFTER_INTERACTION_PERSISTENCE, "interaction_inserts"),
        )
    ),
]


@pytest.mark.parametrize(
    ("check", "arguments"),
    CHECKS,
    ids=[f"{name.removeprefix('test_')}-{'-'.join(map(str, a.values()))}" for name, a in CHECKS],
)
async def test_the_fault_point_check_holds_on_sql_stores(
    check: str, arguments: dict[str, Any], databases: Databases
) -> None:
    stores = await databases.migrated(clock=ManualClock(FAULTS.T0))

    await getattr(FAULTS, check)(stores=stores, **arguments)
