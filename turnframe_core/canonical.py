"""Canonical JSON and `sha256:` digests.

Canonical form: keys sorted at every depth, no insignificant whitespace, UTF-8 (non-ASCII kept as
is), integers as integers. NaN and infinities are refused because JSON cannot carry them. Object
keys are strings (everything hashed comes from JSON or from pydantic's JSON mode). Every
hash in Turnframe (payload hashes, idempotency keys, plan hashes, derived ids, replay chains) is
taken over this form, so it never depends on key order or on a storage engine's re-ordering.

Two encoders write it. The reference is the standard library's (`json`), and it defines the form.
orjson is the fast path, taken only for values it writes byte for byte alike: nothing but dicts,
lists, strings, integers, booleans and None, each of exactly that type. A float (Python's repr
and orjson's differ), a tuple, a subclass, a model nested in a plain value, anything else, and
whatever orjson refuses (a lone surrogate, an integer beyond 64 bits, a non-string key, deep
nesting) goes to the reference, so the text and every error are the reference's.
tests/core/test_canonical_fast.py holds the two to the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Annotated, Any

import orjson
from pydantic import BaseModel, StringConstraints

from turnframe_core.codes import CANONICAL_UNREPRESENTABLE
from turnframe_core.errors import TurnframeError

__all__ = [
    "Digest",
    "DIGEST_PATTERN",
    "CanonicalJsonError",
    "canonical_bytes",
    "canonical_json",
    "digest",
    "digest_bytes",
    "to_jsonable",
]

DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
Digest = Annotated[str, StringConstraints(pattern=DIGEST_PATTERN)]


class CanonicalJsonError(TurnframeError):
    """A value has no canonical JSON form (NaN, infinity, a non-string key, an unknown type)."""

    code = CANONICAL_UNREPRESENTABLE


def to_jsonable(value: Any) -> Any:
    """Turn pydantic models (in JSON mode) into plain JSON values; leave JSON values as they are."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalJsonError("canonical JSON objects need string keys")
            out[key] = to_jsonable(item)
        return out
    if isinstance(value, list | tuple):
        return [to_jsonable(item) for item in value]
    return value


def _nested(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(type(value).__name__)


_ENCODER = json.JSONEncoder(
    sort_keys=True,
    separators=(",", ":"),
    ensure_ascii=False,
    allow_nan=False,
    default=_nested,
)


#: the exact types the fast path takes as leaves; a container is an exact dict or list
_PLAIN_LEAVES = frozenset((str, int, bool, type(None)))
#: nesting the fast path takes (orjson refuses deeper than 255); deeper goes to the reference,
#: and so does a container that holds itself
_PLAIN_DEPTH = 200


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether `value` is made of exact dicts, lists, strings, integers, booleans and None, no
    deeper than `_PLAIN_DEPTH`. Keys are not looked at: orjson refuses a key that is not an
    exact `str`, and the refusal sends the value to the reference encoder."""
    kind = type(value)
    if kind is dict:
        items = value.values()
    elif kind is list:
        items = value
    else:
        return kind in _PLAIN_LEAVES
    if depth >= _PLAIN_DEPTH:
        return False
    for item in items:
        item_kind = type(item)
        if item_kind in _PLAIN_LEAVES:
            continue
        if (item_kind is dict or item_kind is list) and _plain(item, depth + 1):
            continue
        return False
    return True


def _fast_bytes(value: Any) -> bytes | None:
    """orjson's canonical bytes of a plain value, or None where the reference encoder decides."""
    if not _plain(value):
        return None
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # a lone surrogate, an integer beyond 64 bits, a non-str key
        return None


def _reference_json(value: Any) -> str:
    """The canonical JSON text by the reference encoder (the standard library's)."""
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        # The message names the failure class only, never the value (it may be user data).
        reason = type(exc).__name__
        raise CanonicalJsonError(f"value has no canonical JSON form ({reason})") from None


def canonical_json(value: Any) -> str:
    """The canonical JSON text of a JSON value or a pydantic model (models nest anywhere)."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    fast = _fast_bytes(value)
    if fast is not None:
        return fast.decode("utf-8")
    return _reference_json(value)


def canonical_bytes(value: Any) -> bytes:
    """The canonical JSON of `value` as UTF-8; `CanonicalJsonError` for text that has no UTF-8
    form (a lone surrogate)."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    fast = _fast_bytes(value)
    if fast is not None:
        return fast
    try:
        return _reference_json(value).encode("utf-8")
    except UnicodeEncodeError:
        raise CanonicalJsonError("value has no canonical JSON form (a lone surrogate)") from None


def digest_bytes(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest(value: Any) -> str:
    """`sha256:<hex>` of the canonical JSON of `value`."""
    return digest_bytes(canonical_bytes(value))
