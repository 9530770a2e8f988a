"""Shared fixtures. Backends for service tests are chosen in tests/services.py (DESIGN §13); the
store-backend fixture (`store_backend`: memory, SQLite, PostgreSQL) comes from the shipped test
kit's pytest plugin. The runtime and outbox tests take a travel desk on that backend from
`desk` / `make_desk`, so every scenario runs on each."""

import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from turnframe_test.audit_kit import assert_conversation_audited
from turnframe_test.backends import StoreBackend, require_services
from turnframe_test.invariants import unreceipted_events
from turnframe_test.sample.desk import DeskHarness
from turnframe_test.telemetry_kit import captured_telemetry

# The adopters' plugin (also an entry point), the release gates' plugin (for `turnframe gates` and
# CI's `--turnframe-gates-report`: it names this repository's tests, so no adopter loads it) and
# the service fixtures.
pytest_plugins = ("turnframe_test.pytest_plugin", "turnframe_test.gates_plugin", "services")

#: Every test runs with the runtime's spans, metrics and logs captured in memory; a test with a
#: travel desk then checks that none of it holds a user's words or a model's output.
TELEMETRY = captured_telemetry()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under `--dist loadgroup`, a test marked `xdist_group` must carry its group in its node id,
    which is how pytest-xdist keeps the group on one worker. A pytest and pytest-xdist that stop
    doing so (pytest-dev/pytest-xdist#1386) would run the tests sharing the Redis broker side by
    side, and they empty and restart it: such a test fails instead of running unguarded."""
    if not getattr(item.config.option, "loadgroup", False):
        return
    if item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid:
        pytest.fail(
            "--dist loadgroup kept no group for this test: this pytest and pytest-xdist do not "
            "group (pytest-dev/pytest-xdist#1386), so it would run beside the others sharing its "
            "service",
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def _fresh_telemetry() -> None:
    TELEMETRY.clear()


DeskFactory = Callable[..., Awaitable[DeskHarness]]


@pytest.fixture
def turnframe_postgres_url(postgres_url: str) -> str:
    """The `store_backend` fixture's PostgreSQL: the server tests/services.py finds (environment,
    local server or testcontainers), failing under TURNFRAME_REQUIRE_SERVICES=1 when there is
    none."""
    return postgres_url


@pytest.fixture
async def make_desk(
    store_backend: StoreBackend, request: pytest.FixtureRequest
) -> AsyncIterator[DeskFactory]:
    """`await make_desk(narrator=...)`: a harness on fresh stores of this test's backend.

    When the test is done, every turn of each harness's conversation must replay verified with
    its audit chain intact (`assert_conversation_audited`), so each scenario is also an audit
    test; once every turn ended, every event a turn committed is cited by a receipt of its reply
    (`unreceipted_events`); and none of its words may have reached telemetry. A test that breaks
    stored data on purpose says so with `@pytest.mark.unaudited` and is checked for none of it."""
    made: list[DeskHarness] = []

    async def factory(**kwargs: Any) -> DeskHarness:
        desk = await DeskHarness.on(store_backend, **kwargs)
        made.append(desk)
        return desk

    yield factory
    if request.node.get_closest_marker("unaudited") is not None:
        return  # its stored data is broken on purpose: neither audited nor read for the check
    for desk in made:
        await assert_conversation_audited(desk.stores, desk.account_id, desk.conversation_id)
        if await _at_rest(desk):
            assert (
                await unreceipted_events(desk.stores, desk.account_id, desk.conversation_id) == []
            )
    TELEMETRY.assert_free_of([text for desk in made for text in await _private_words(desk)])


async def _at_rest(desk: DeskHarness) -> bool:
    """Whether every turn of the desk's conversation ended (a test may leave one a crash
    interrupted, for recovery it does not run)."""
    conversations = desk.stores.conversations
    for turn in await conversations.list_turns(desk.account_id, desk.conversation_id):
        if not (await conversations.get_phase(desk.account_id, turn.turn_id)).phase.is_terminal:
            return False
    return True


async def _private_words(desk: DeskHarness) -> list[str]:
    """What the desk's conversation holds that telemetry must never: the user's messages and
    free text, the prose a model wrote."""
    records = await desk.stores.replay.for_conversation(desk.account_id, desk.conversation_id)
    turns = await desk.runtime.load_conversation(desk.account_id, desk.conversation_id, 500)
    words = [r.input.text for r in records if r.input.text]
    words += [
        r.input.interaction_response.freeform_input
        for r in records
        if r.input.interaction_response and r.input.interaction_response.freeform_input
    ]
    words += [
        block.text
        for turn in turns
        for block in turn.blocks
        if getattr(block, "author", None) == "model" and getattr(block, "text", None)
    ]
    return words


@pytest.fixture
async def desk(make_desk: DeskFactory) -> DeskHarness:
    """A harness with the defaults on fresh stores of this test's backend."""
    return await make_desk()


CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture
def browser() -> Iterator[Any]:
    """Debian's headless Chromium driven by playwright (never a downloaded browser); a missing
    one skips with the reason, or fails under TURNFRAME_REQUIRE_SERVICES=1."""
    executable = CHROMIUM if CHROMIUM.exists() else shutil.which("chromium")
    if executable is None:
        _unavailable("no Chromium at /usr/bin/chromium (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed (pip install -e '.[dev]')")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(executable), args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        try:
            yield launched
        finally:
            launched.close()


def _unavailable(reason: str) -> None:
    if require_services():
        pytest.fail(f"TURNFRAME_REQUIRE_SERVICES=1 and {reason}", pytrace=False)
    print(f"skipped: {reason}")
    pytest.skip(reason)
