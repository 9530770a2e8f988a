"""Tests find their database as DESIGN §13 says: the environment's URL, else a local server, else
testcontainers, else a skip naming why; under TURNFRAME_REQUIRE_SERVICES=1 a failure instead."""

from __future__ import annotations

import pytest
import services
from services import Service, find_postgres


def test_a_missing_service_fails_when_services_are_required(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TURNFRAME_REQUIRE_SERVICES", "1")

    with pytest.raises(pytest.fail.Exception, match="no PostgreSQL here"):
        Service(None, "no PostgreSQL here").use()


def test_a_missing_service_skips_with_its_reason_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TURNFRAME_REQUIRE_SERVICES", raising=False)

    with pytest.raises(pytest.skip.Exception, match="no PostgreSQL here"):
        Service(None, "no PostgreSQL here").use()


def test_the_url_in_the_environment_comes_first(
    monkeypatch: pytest.MonkeyPatch, postgres_url: str
) -> None:
    monkeypatch.setenv("TURNFRAME_TEST_DATABASE_URL", postgres_url)
    monkeypatch.setattr(services, "_answers", lambda port: pytest.fail("probed a local server"))

    found = find_postgres([])

    assert (found.url, found.source) == (postgres_url, "TURNFRAME_TEST_DATABASE_URL")


def test_an_environment_url_the_server_refuses_is_reported_not_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TURNFRAME_TEST_DATABASE_URL", "postgresql+psycopg://nobody@127.0.0.1:1/x")

    found = find_postgres([])

    assert found.url is None
    assert "refused" in found.source


def test_without_a_server_or_a_docker_engine_the_reason_names_every_place_looked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TURNFRAME_TEST_DATABASE_URL", raising=False)
    monkeypatch.setattr(services, "_answers", lambda port: False)
    monkeypatch.setattr(services, "_docker_engine", lambda: False)

    found = find_postgres([])

    assert found.url is None
    for place in ("TURNFRAME_TEST_DATABASE_URL", "127.0.0.1:5432", "Docker"):
        assert place in found.source
