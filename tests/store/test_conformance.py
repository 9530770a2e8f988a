"""The conformance suite: every store passes each check (memory, SQLite, PostgreSQL), and the
runner reports, never raises."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable

import pytest

from turnframe_store import MemoryStores, Stores, conformance
from turnframe_store.conformance import CHECKS, run_all, run_check


async def memory_factory() -> Stores:
    return MemoryStores()


@pytest.mark.parametrize("name", CHECKS)
async def test_every_store_passes_the_conformance_check(
    name: str, conformance_factory: Callable[[], Awaitable[Stores]]
) -> None:
    """Each check once on each backend (tests/store/conftest.py), each on a fresh store."""
    result = await run_check(name, conformance_factory)

    assert result.passed, result.detail


async def test_each_check_gets_a_fresh_store_from_the_factory() -> None:
    made: list[Stores] = []

    async def counting_factory() -> Stores:
        made.append(MemoryStores())
        return made[-1]

    await run_all(counting_factory)

    assert len(made) == len(CHECKS)
    assert len({id(stores) for stores in made}) == len(CHECKS)


async def test_an_unexpected_error_inside_a_check_is_reported_not_raised() -> None:
    class Exploding(MemoryStores):
        pass

    async def factory() -> Stores:
        stores = Exploding()

        async def explode(*_: object) -> None:
            raise RuntimeError("boom")

        stores.conversations.ensure_conversation = explode  # type: ignore[method-assign]
        return stores

    result = await run_check("check_the_phase_marker_never_leaves_a_terminal_phase", factory)

    assert not result.passed
    assert result.detail == "unexpected RuntimeError: boom"


async def test_a_factory_that_fails_fails_each_check_with_the_reason() -> None:
    async def broken_factory() -> Stores:
        raise ConnectionError("no database")

    report = await run_all(broken_factory, names=CHECKS[:3])

    assert report.failed_names == CHECKS[:3]
    assert all("ConnectionError: no database" in r.detail for r in report.failures)


async def test_an_unknown_check_name_is_a_failure_in_the_report() -> None:
    report = await run_all(memory_factory, names=["check_that_does_not_exist"])

    assert report.failed_names == ("check_that_does_not_exist",)


async def test_a_check_that_hangs_is_cut_off_by_the_timeout() -> None:
    class Hanging(MemoryStores):
        pass

    async def factory() -> Stores:
        stores = Hanging()

        async def hang(*_: object) -> None:
            import asyncio

            await asyncio.Event().wait()

        stores.conversations.ensure_conversation = hang  # type: ignore[method-assign]
        return stores

    result = await run_check(
        "check_the_phase_marker_never_leaves_a_terminal_phase", factory, timeout_s=0.05
    )

    assert not result.passed
    assert "did not finish within" in result.detail


async def test_the_report_describes_every_check_with_its_verdict() -> None:
    report = await run_all(memory_factory, names=CHECKS[:2])

    lines = report.describe().splitlines()

    assert lines[0] == "2/2 store conformance checks passed"
    assert [line.split()[:2] for line in lines[1:]] == [["PASS", name] for name in CHECKS[:2]]


def test_every_check_is_a_public_coroutine_named_as_a_sentence() -> None:
    assert len(CHECKS) == len(set(CHECKS))
    for name in CHECKS:
        check = getattr(conformance, name)
        assert re.fullmatch(r"check(_[a-z0-9]+){3,}", name), name
        assert inspect.iscoroutinefunction(check), name
        assert list(inspect.signature(check).parameters) == ["stores"], name
