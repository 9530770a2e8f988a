"""Timers: what a timer record holds, and the sweep's safety over its whole input space (any
sweeps, firings and cancels, on memory and SQLite) against a model of the status machine."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from turnframe_core.canonical import canonical_json
from turnframe_store import (
    Conflict,
    MemoryStores,
    SqlStores,
    Stores,
    TimerRecord,
    TimerStatus,
)
from turnframe_store import builders as build
from turnframe_store.builders import ACCOUNT_A, ACCOUNT_B, T0


@pytest.mark.parametrize(
    "event",
    ["", "[]", "null", '"x"', '{"b":1,"a":2}', '{"a": 1}', '{"a":1} ', "{'a':1}", '{"a":NaN}'],
)
def test_a_timers_event_is_the_canonical_json_of_an_object(event: str) -> None:
    with pytest.raises(ValidationError):
        build.timer("tmr_1", event=event)


def test_a_canonical_object_is_a_timers_event() -> None:
    event = canonical_json({"z": "\u00e9", "a": [1, {"b": None}]})

    assert build.timer("tmr_1", event=event).event == event


@pytest.mark.parametrize(
    "lifecycle",
    [
        {"worker_id": "w1", "claimed_at": T0},  # pending with a claim
        {"status": TimerStatus.CLAIMED},  # claimed without one
        {"status": TimerStatus.CLAIMED, "worker_id": "w1"},  # a worker but no claim time
        {"status": TimerStatus.FIRED, "worker_id": "w1", "claimed_at": T0},  # no fired_at
        {"status": TimerStatus.CANCELLED, "fired_at": T0},  # fired_at without firing
        {"status": TimerStatus.CLAIMED, "worker_id": "", "claimed_at": T0},  # a nameless worker
    ],
)
def test_a_timers_claim_and_firing_match_its_status(lifecycle: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        TimerRecord.model_validate({**build.timer("tmr_1").model_dump(), **lifecycle})


# --- the sweep against a model ------------------------------------------------------------------


@dataclass
class _Model:
    """What the status machine says each timer is, keyed (account, timer id)."""

    due: dict[tuple[str, str], int]
    status: dict[tuple[str, str], TimerStatus] = field(default_factory=dict)
    holder: dict[tuple[str, str], str] = field(default_factory=dict)
    claimed_at: dict[tuple[str, str], int] = field(default_factory=dict)

    def claimable(self, key: tuple[str, str], now: int, lease: int) -> bool:
        status = self.status[key]
        if status is TimerStatus.PENDING:
            return self.due[key] <= now
        return status is TimerStatus.CLAIMED and self.claimed_at[key] <= now - lease


_SWEEP = st.tuples(
    st.just("claim"),
    # how much later than the last sweep: any small step, or one at the edge of a lease
    st.one_of(st.integers(0, 12), st.sampled_from([-1, 0, 1])),
    st.booleans(),
    st.integers(1, 5),
    st.sampled_from(["w1", "w2", "w3"]),
)
_FIRE = st.tuples(st.just("fire"), st.integers(0, 7), st.sampled_from(["w1", "w2", "w3"]))
_CANCEL = st.tuples(st.just("cancel"), st.integers(0, 7))


async def _play(stores: Stores, dues: list[int], lease: int, steps: list[tuple[Any, ...]]) -> None:
    for account in (ACCOUNT_A, ACCOUNT_B):
        await stores.conversations.ensure_conversation(account, "conv_1")
    keys = [((ACCOUNT_A, ACCOUNT_B)[n % 2], f"tmr_{n}") for n in range(len(dues))]
    model = _Model(due={key: T0 + due for key, due in zip(keys, dues, strict=True)})
    for key in keys:
        await stores.timers.schedule(build.timer(key[1], account=key[0], due_at=model.due[key]))
        model.status[key] = TimerStatus.PENDING
    now = T0
    held: dict[tuple[str, str], list[tuple[int, str]]] = {key: [] for key in keys}
    for step in steps:
        if step[0] == "claim":
            _, later, by_lease, limit, worker = step
            now += lease + later if by_lease else max(later, 0)
            expected = sorted(
                (k for k in keys if model.claimable(k, now, lease)),
                key=lambda k: (model.due[k], k[0], k[1]),
            )[:limit]
            batch = await stores.timers.claim_due(now, lease, limit, worker)
            assert [(r.account_id, r.timer_id) for r in batch] == expected
            for key in expected:
                # never two holders at once: the previous claim's lease ran out before this one
                assert all(start + lease <= now for start, _ in held[key])
                held[key].append((now, worker))
                model.status[key] = TimerStatus.CLAIMED
                model.holder[key], model.claimed_at[key] = worker, now
        elif step[0] == "fire":
            _, n, worker = step
            if n >= len(keys):
                continue
            key = keys[n]
            status, holder = model.status[key], model.holder.get(key)
            if status in (TimerStatus.CLAIMED, TimerStatus.FIRED) and holder == worker:
                fired = await stores.timers.mark_fired(*key, worker)
                assert (fired.status, fired.worker_id) == (TimerStatus.FIRED, worker)
                model.status[key] = TimerStatus.FIRED
            else:
                with pytest.raises(Conflict):
                    await stores.timers.mark_fired(*key, worker)
        else:
            _, n = step
            if n >= len(keys):
                continue
            key = keys[n]
            cancelled = await stores.timers.cancel(*key)
            if model.status[key] in (TimerStatus.PENDING, TimerStatus.CLAIMED):
                model.status[key] = TimerStatus.CANCELLED
            assert cancelled.status is model.status[key]
    for key in keys:
        assert (await stores.timers.get(*key)).status is model.status[key]


_PLAYS = {
    "dues": st.lists(st.integers(0, 30), min_size=1, max_size=8),
    "lease": st.integers(1, 12),
    "steps": st.lists(st.one_of(_SWEEP, _FIRE, _CANCEL), max_size=25),
}


@settings(max_examples=150, deadline=None)
@given(**_PLAYS)
def test_the_memory_sweep_claims_exactly_what_the_status_machine_allows(
    dues: list[int], lease: int, steps: list[tuple[Any, ...]]
) -> None:
    asyncio.run(_play(MemoryStores(), dues, lease, steps))


@settings(max_examples=40, deadline=None)
@given(**_PLAYS)
def test_the_sqlite_sweep_claims_exactly_what_the_status_machine_allows(
    dues: list[int], lease: int, steps: list[tuple[Any, ...]]
) -> None:
    async def play() -> None:
        stores = await SqlStores.connect("sqlite+aiosqlite://")
        try:
            await stores.migrate()
            await _play(stores, dues, lease, steps)
        finally:
            await stores.aclose()

    asyncio.run(play())
