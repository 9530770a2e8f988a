"""The runtime scenarios run unchanged on SqlStores: the same scenario functions as
tests/runtime/test_scenarios.py, with the harness's stores swapped for SQLite and PostgreSQL."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from services import Databases

from turnframe_store import ManualClock
from turnframe_test.harness import DeskHarness

SCENARIOS_FILE = Path(__file__).resolve().parents[2] / "runtime" / "test_scenarios.py"

SCENARIOS = (
    "test_one_message_sets_several_independent_fields_atomically",
    "test_a_stale_confirmation_after_an_edit_is_rejected",
    "test_a_double_click_executes_at_most_once",
    "test_failed_interaction_persistence_cannot_produce_text_referring_to_a_visible_card",
    "test_a_database_timeout_during_an_atomic_batch_leaves_no_hidden_partial_state",
    "test_an_external_timeout_becomes_an_unknown_outcome_rather_than_a_blind_retry",
    "test_a_reload_returns_the_same_ordered_blocks_and_interaction_state",
    "test_identifiers_that_name_nothing_or_another_tenants_record_leak_nothing",
    "test_a_consequential_act_waits_for_the_card_its_policy_names",
    "test_every_turn_records_its_phase_and_replay_record",
)


def _scenarios() -> ModuleType:
    spec = importlib.util.spec_from_file_location("scenarios_on_sql", SCENARIOS_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_the_runtime_scenario_runs_unchanged_on_sql_stores(
    scenario: str, databases: Databases, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock()
    stores = await databases.migrated(clock=clock)

    class SqlDesk(DeskHarness):
        """The scenarios' harness, on this test's SQL database and one shared clock."""

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**{"stores": stores, "clock": clock, **kwargs})

    module = _scenarios()
    monkeypatch.setattr(module, "DeskHarness", SqlDesk)

    await getattr(module, scenario)()
