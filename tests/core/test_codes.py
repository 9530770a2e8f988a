"""Every stable code is one the library can emit: a code nothing names outside its own
definition is a promise no path keeps (decision 0020)."""

from __future__ import annotations

import re
from pathlib import Path

from turnframe_core import codes

ROOT = Path(__file__).resolve().parents[2]
LIBRARIES = ("turnframe_core", "turnframe_store", "turnframe_runtime")


def _library_source() -> str:
    return "\n".join(
        path.read_text(encoding="utf-8")
        for package in LIBRARIES
        for path in sorted((ROOT / package).rglob("*.py"))
    )


def test_every_stable_code_is_named_where_the_library_emits_it() -> None:
    source = _library_source()
    names = {
        name: value
        for name, value in vars(codes).items()
        if name.isupper() and isinstance(value, str) and value in codes.ALL_CODES
    }
    never = [
        name
        for name, value in sorted(names.items())
        if len(re.findall(rf"\b{name}\b", source)) < 2 and source.count(f'"{value}"') < 2
    ]
    assert never == []
