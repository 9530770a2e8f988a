"""A derived id's body is what base64.b32encode wrote for it before derive_id encoded its bits
itself (turnframe_core/ids.py): every id a store holds is derived again byte for byte."""

import base64
import hashlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from turnframe_core.canonical import canonical_bytes
from turnframe_core.ids import PREFIXES, derive_id


def b32_derive_id(prefix: str, domain: str, inputs: Any) -> str:
    """derive_id as it was written with base64.b32encode."""
    material = domain.encode("utf-8") + b"\x00" + canonical_bytes(inputs)
    body = base64.b32encode(hashlib.sha256(material).digest()[:17]).decode("ascii").lower()
    return f"{prefix}_{body[:26]}"


def test_fifty_thousand_derived_ids_are_what_b32encode_wrote():
    for n in range(50_000):
        prefix = PREFIXES[n % len(PREFIXES)]
        inputs = {"n": n, "turn": f"turn_{n:010d}", "acts": [n % 7, "a1"]}
        assert derive_id(prefix, f"domain {n % 13}", inputs) == b32_derive_id(  # type: ignore[arg-type]
            prefix, f"domain {n % 13}", inputs
        )


def test_fixed_ids_do_not_move():
    assert derive_id("blk", "d1", {"x": 1}) == "blk_grdm7swilzs6p5xxzj32k7tdy6"
    assert derive_id("rpl", "", None) == "rpl_wamnehoornvjhcxmyk5v77ppnq"


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PREFIXES), st.text(max_size=20), st.integers() | st.text() | st.none())
def test_any_derived_id_is_what_b32encode_wrote(prefix, domain, inputs):
    assert derive_id(prefix, domain, inputs) == b32_derive_id(prefix, domain, inputs)
