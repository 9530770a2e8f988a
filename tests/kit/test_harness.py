"""The harness serves any adopter's domain: `Harness` takes the workflows, directory, executor
and senders it drives; the travel desk's `DeskHarness` is that harness with the sample domain; the
sample domain's old module paths name the same modules as `turnframe_test.sample`'s."""

from __future__ import annotations

import importlib
import inspect

import pytest

from turnframe_store import JournalStatus
from turnframe_test import Harness, ScriptedInterpreter, act
from turnframe_test.backends import StoreBackend
from turnframe_test.sample.airline import FakeAirline
from turnframe_test.sample.desk import DeskHarness
from turnframe_test.sample.travel import (
    SET_NAME,
    TripDesk,
    TripDirectory,
    TripExecutor,
    TripWorkflow,
    trip_copy,
)


async def test_a_harness_drives_a_domain_it_is_handed(store_backend: StoreBackend) -> None:
    desk = TripDesk()  # stands for any adopter's domain: the harness knows nothing of trips
    harness = await Harness.on(
        store_backend,
        workflows=[TripWorkflow()],
        directory=TripDirectory(desk),
        executor=TripExecutor(desk),
        senders={"airline": FakeAirline()},
        copy=trip_copy(),  # a domain's own words
    )
    desk.open_trip(harness.account_id, "T-1", "Oslo trip", conversation_id=harness.conversation_id)
    turn = await harness.say("I am Grace", act("a1", SET_NAME, "h1", "Grace", name="Grace"))
    assert harness.receipt_codes(turn) == ["trip.name_set"]
    assert await harness.event_types() == ["trip.name_set"]
    assert [e.status for e in await harness.journal(turn)] == [JournalStatus.COMMITTED]
    again = await Harness.on(
        store_backend,
        stores=harness.stores,
        workflows=harness.workflows,
        directory=harness.directory,
        executor=harness.executor,
        copy=harness.copy,
    )
    assert again.stores is harness.stores


async def test_the_desk_harness_is_the_harness_with_the_sample_domain(
    store_backend: StoreBackend,
) -> None:
    desk = await DeskHarness.on(store_backend)
    assert isinstance(desk, Harness)
    assert desk.senders == {"airline": desk.airline}
    assert desk.workflows == (desk.workflow,)
    desk.ready_trip()
    before = desk.revision()
    turn = await desk.say("I am Grace", act("a1", SET_NAME, "h1", "Grace", name="Grace"))
    assert desk.receipt_codes(turn) == ["trip.name_set"]
    assert desk.revision() == before + 1


def test_the_desk_harness_takes_every_port_the_harness_takes() -> None:
    interpreter = ScriptedInterpreter()
    desk = DeskHarness(interpreter=interpreter)
    assert desk.interpreter is interpreter
    own = set(inspect.signature(Harness.__init__).parameters)
    # what the sample domain supplies itself, and nothing more, is missing from its signature
    supplied = {"workflows", "directory", "executor", "senders"}
    assert own - supplied <= set(inspect.signature(DeskHarness.__init__).parameters)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("turnframe_test.domains.travel", "turnframe_test.sample.travel"),
        ("turnframe_test.domains.travel_model", "turnframe_test.sample.travel_model"),
        ("turnframe_test.domains.travel_pg", "turnframe_test.sample.travel_pg"),
        ("turnframe_test.airline", "turnframe_test.sample.airline"),
        ("turnframe_test.sayings", "turnframe_test.sample.sayings"),
        ("turnframe_test.demo", "turnframe_test.sample.demo"),
    ],
)
def test_an_old_path_of_the_sample_domain_is_the_same_module(old: str, new: str) -> None:
    assert importlib.import_module(old) is importlib.import_module(new)


def test_the_desk_harness_keeps_its_names() -> None:
    import turnframe_test
    import turnframe_test.harness

    assert turnframe_test.DeskHarness is turnframe_test.harness.DeskHarness is DeskHarness
