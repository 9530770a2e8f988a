"""Conformance checks: replay records."""

from __future__ import annotations

from turnframe_core._derive import derive_replay_token
from turnframe_core.replay import TurnPhase
from turnframe_store.bundle import Stores
from turnframe_store.conformance._data import _A, _T0, _replay
from turnframe_store.conformance._expect import _equal, _refused
from turnframe_store.conformance._runner import _check
from turnframe_store.errors import Conflict, InvalidRecord, NotFound


@_check
async def check_a_replay_record_is_upserted_until_its_phase_is_terminal(stores: Stores) -> None:
    replay = stores.replay
    first = _replay("turn_1")
    await replay.put(first)
    await replay.put(first)
    _equal(await replay.get(_A, "turn_1"), first, "the first record")
    committed = first.advanced(TurnPhase.COMMITTED, at=_T0 + 10, event_ids=("evt_1",))
    await replay.put(committed)
    _equal(await replay.get(_A, "turn_1"), committed, "the upserted record")
    _equal(await replay.get_by_token(_A, first.replay_token), committed, "the record by token")
    final = committed.advanced(TurnPhase.DELIVERED, at=_T0 + 20)
    await replay.put(final)
    await replay.put(final)
    await _refused(
        Conflict,
        replay.put(final.model_copy(update={"failure_code": "conformance.late"})),
        "changing a final record",
    )
    await _refused(Conflict, replay.put(committed), "moving a final record back")
    _equal(await replay.get(_A, "turn_1"), final, "the final record")
    forged = _replay("turn_2").model_copy(update={"replay_token": derive_replay_token("turn_3")})
    await _refused(InvalidRecord, replay.put(forged), "a token not derived from its turn")
    await _refused(NotFound, replay.get(_A, "turn_2"), "the refused record")
