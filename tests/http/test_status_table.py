"""The status table is one table: docs/http.md shows exactly `errors.STATUS`, every status the
issue names is used, and each listed error has a stable code of the library's."""

from __future__ import annotations

import re
from pathlib import Path

from turnframe_core import codes
from turnframe_runtime.http import STATUS
from turnframe_runtime.http.errors import status_of
from turnframe_store import Busy, Unavailable

DOC = Path(__file__).resolve().parents[2] / "docs" / "http.md"
_ROW = re.compile(r"^\| (\d{3}) \| `([a-z_.]+)` \| `(\w+)` \|$", re.M)


def test_the_documented_table_is_the_table_the_app_answers_with() -> None:
    documented = _ROW.findall(DOC.read_text(encoding="utf-8"))

    assert sorted((int(s), code, name) for s, code, name in documented) == sorted(
        (status, kind.code, kind.__name__) for kind, status in STATUS.items()
    )


def test_every_status_the_issue_names_is_answered_and_every_code_is_stable() -> None:
    assert set(STATUS.values()) == {400, 401, 404, 409, 410, 413, 422, 429, 503}
    assert [k.__name__ for k in STATUS if k.code not in codes.ALL_CODES] == []


def test_an_error_answers_as_its_own_class_before_its_base() -> None:
    assert status_of(Busy("held")) == 409
    assert status_of(Unavailable("away")) == 503
    assert status_of(RuntimeError("boom")) is None
