"""The outbox tests' harness: a travel desk on the test's store backend (memory, SQLite and
PostgreSQL), its airline reached only through the outbox."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

import pytest

from turnframe_test.backends import StoreBackend
from turnframe_test.harness import DeskHarness

DeskFactory = Callable[..., Awaitable[DeskHarness]]


@pytest.fixture
def make_desk(store_backend: StoreBackend) -> DeskFactory:
    """`await make_desk(narrator=...)`: a harness on fresh stores of this test's backend."""
    return partial(DeskHarness.on, store_backend)


@pytest.fixture
async def desk(make_desk: DeskFactory) -> DeskHarness:
    """A harness with the defaults on fresh stores of this test's backend."""
    return await make_desk()
