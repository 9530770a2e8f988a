"""Identifiers: prefixed fresh ids (ULID) and derived ids.

Fresh ids come from an injectable `IdSource` (the runtime owns one, so tests are deterministic).
Ids that a replay must reproduce (blocks, receipts, commands, batches, interactions, outbox rows,
replay tokens) are DERIVED: a domain string and the canonical JSON of the inputs, hashed with
sha256 and rendered in lowercase base32. Never random where replay needs the same id.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import threading
import time
from collections.abc import Callable
from typing import Annotated, Any, Final, Literal, Protocol

from pydantic import StringConstraints

from turnframe_core.canonical import canonical_bytes
from turnframe_core.codes import ID_INVALID
from turnframe_core.errors import TurnframeError

__all__ = [
    "AccountId",
    "BatchId",
    "BlockId",
    "CommandId",
    "ConversationId",
    "EventId",
    "MAX_ACCOUNT_CHARS",
    "IdPrefix",
    "IdSource",
    "InteractionId",
    "InvalidId",
    "OptionId",
    "OutboxId",
    "PREFIXES",
    "ReceiptId",
    "ReplayToken",
    "SequentialIdSource",
    "TurnId",
    "UlidIdSource",
    "derive_id",
    "is_account_id",
    "is_derived_id",
    "require_prefixed",
]

IdPrefix = Literal[
    "conv", "turn", "blk", "evt", "cmd", "int", "opt", "obx", "rcp", "rpl", "bat", "tmr"
]  # fmt: skip
PREFIXES: Final[tuple[str, ...]] = (
    "conv", "turn", "blk", "evt", "cmd", "int", "opt", "obx", "rcp", "rpl", "bat", "tmr",
)  # fmt: skip

_BODY = r"[0-9A-Za-z][0-9A-Za-z_-]{0,127}"
_ACCOUNT = r"[A-Za-z0-9][A-Za-z0-9_.:@-]*"
#: the longest account id
MAX_ACCOUNT_CHARS: Final = 200

ConversationId = Annotated[str, StringConstraints(pattern=rf"^conv_{_BODY}$")]
TurnId = Annotated[str, StringConstraints(pattern=rf"^turn_{_BODY}$")]
BlockId = Annotated[str, StringConstraints(pattern=rf"^blk_{_BODY}$")]
EventId = Annotated[str, StringConstraints(pattern=rf"^evt_{_BODY}$")]
CommandId = Annotated[str, StringConstraints(pattern=rf"^cmd_{_BODY}$")]
InteractionId = Annotated[str, StringConstraints(pattern=rf"^int_{_BODY}$")]
OptionId = Annotated[str, StringConstraints(pattern=rf"^opt_{_BODY}$")]
OutboxId = Annotated[str, StringConstraints(pattern=rf"^obx_{_BODY}$")]
ReceiptId = Annotated[str, StringConstraints(pattern=rf"^rcp_{_BODY}$")]
ReplayToken = Annotated[str, StringConstraints(pattern=rf"^rpl_{_BODY}$")]
BatchId = Annotated[str, StringConstraints(pattern=rf"^bat_{_BODY}$")]
#: The tenant boundary. Adopter-chosen; no prefix required.
AccountId = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_ACCOUNT_CHARS, pattern=rf"^{_ACCOUNT}$")
]


class InvalidId(TurnframeError):
    code = ID_INVALID


def require_prefixed(prefix: str, value: str) -> str:
    """Return `value` if it is a well-formed id with `prefix`, else raise `InvalidId`."""
    if not isinstance(value, str) or not re.fullmatch(rf"{prefix}_{_BODY}", value):
        raise InvalidId(f"not a well-formed {prefix}_ id")
    return value


def is_account_id(value: object) -> bool:
    """Whether `value` is an account id (`AccountId`)."""
    return (
        isinstance(value, str)
        and len(value) <= MAX_ACCOUNT_CHARS
        and re.fullmatch(_ACCOUNT, value) is not None
    )


# --- fresh ids ----------------------------------------------------------------------------------

_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def _crockford(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


class IdSource(Protocol):
    """Where fresh (non-derived) ids come from."""

    def new_id(self, prefix: IdPrefix) -> str: ...


class UlidIdSource:
    """ULID ids (48-bit millisecond time + 80 random bits), lowercase Crockford base32.

    Ids from one source sort by creation time; within one millisecond the random part is
    incremented so they still sort in creation order.

    Never of the derived form (`is_derived_id`): the body's first character is the time's top 3
    bits (0-7), a digit 0 or 1 until 2^46 ms after the epoch (the year 4199), and a derived body
    holds no 0, 1, 8 or 9.
    """

    def __init__(
        self,
        clock_ms: Callable[[], int] | None = None,
        random_bytes: Callable[[int], bytes] = os.urandom,
    ) -> None:
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._random_bytes = random_bytes
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_rand = 0

    def new_id(self, prefix: IdPrefix) -> str:
        with self._lock:
            now = self._clock_ms()
            if now <= self._last_ms:
                now = self._last_ms
                rand = (self._last_rand + 1) & ((1 << 80) - 1)
            else:
                rand = int.from_bytes(self._random_bytes(10), "big")
            self._last_ms, self._last_rand = now, rand
        return f"{prefix}_{_crockford(now & ((1 << 48) - 1), 10)}{_crockford(rand, 16)}"


class SequentialIdSource:
    """Deterministic ids for tests and replays: `turn_0000000001`, `turn_0000000002`, …"""

    def __init__(self, start: int = 1) -> None:
        self._next = start
        self._lock = threading.Lock()

    def new_id(self, prefix: IdPrefix) -> str:
        with self._lock:
            value, self._next = self._next, self._next + 1
        return f"{prefix}_{value:010d}"


# --- derived ids --------------------------------------------------------------------------------


#: what `derive_id` writes: a prefix, then 26 characters of the lowercase RFC 4648 alphabet
_DERIVED: Final = re.compile(rf"(?:{'|'.join(PREFIXES)})_[a-z2-7]{{26}}")


_BASE32: Final = "abcdefghijklmnopqrstuvwxyz234567"
#: every 10-bit value as its two base32 characters
_BASE32_PAIRS: Final = tuple(_BASE32[i >> 5] + _BASE32[i & 31] for i in range(1024))


def derive_id(prefix: IdPrefix, domain: str, inputs: Any) -> str:
    """`{prefix}_` + 26 lowercase base32 chars (130 bits) of sha256(domain NUL canonical_json)."""
    material = domain.encode("utf-8") + b"\x00" + canonical_bytes(inputs)
    # The first 130 bits of the hash as 26 base32 characters (RFC 4648 alphabet, lowercase):
    # the first 120 bits (15 bytes, no padding) by base64, the last 10 from a table.
    hashed = hashlib.sha256(material).digest()
    body = base64.b32encode(hashed[:15]).decode("ascii").lower()
    return f"{prefix}_{body}{_BASE32_PAIRS[int.from_bytes(hashed[15:17], 'big') >> 6]}"


def is_derived_id(value: str) -> bool:
    """Whether `value` has the form `derive_id` gives (a prefix, `_`, 26 of `[a-z2-7]`): an id
    the server derives for its own records, which a client must never choose. Fresh ids are
    not of it: a ULID's (`UlidIdSource`), nor a `SequentialIdSource`'s (digits, fewer than 26
    below 10^25)."""
    return _DERIVED.fullmatch(value) is not None
