"""Where a server event comes from, and what authority its commands carry (`EventOrigin`).

Rules:
- A runtime knows its origins by name (`TurnRuntime(origins=...)`); an event naming any other is
  refused before anything is read or written.
- `verify` judges the event's canonical bytes (`ServerEvent.signing_bytes()`) and the signature
  that came with them; it never raises for a bad signature, it answers False.
- `requires_signature` says whether the origin's events come signed at all; one that needs no
  signature (`TrustedOrigin`) is reachable only from code inside the deployment, never HTTP.
- `command_origin` is the `CommandOrigin` every command of a verified event carries: the
  workflow's policy then decides, as for any command, whether it runs now, waits for the user's
  click on a confirmation card, or is refused.
"""

from __future__ import annotations

import hashlib
import hmac
from abc import ABC, abstractmethod

from turnframe_core.commands import CommandOrigin, ExternalCallback, InternalPolicy
from turnframe_core.server_events import ServerEvent, is_origin_name

__all__ = ["EventOrigin", "HmacOrigin", "TrustedOrigin"]


class EventOrigin(ABC):
    """A sender of server events, by name: how its events are verified and what authority its
    commands carry."""

    def __init__(self, name: str) -> None:
        if not is_origin_name(name):
            raise ValueError(
                "an origin's name is 1-64 lowercase letters, digits, '_', '.' or '-' "
                "(starting with a letter or digit)"
            )
        self.name = name

    @property
    def requires_signature(self) -> bool:
        """Whether its events come signed (`verify` checks the signature). One that needs none
        is code inside the deployment: the HTTP layer never serves it."""
        return True

    @abstractmethod
    def verify(self, payload: bytes, signature: str | None) -> bool:
        """Whether `signature` vouches for `payload` (the event's canonical bytes)."""

    @abstractmethod
    def command_origin(self, event: ServerEvent) -> CommandOrigin:
        """The origin the commands of a verified `event` carry."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class HmacOrigin(EventOrigin):
    """An outside system that signs each event with a shared secret: the signature is the
    lowercase hex HMAC-SHA256 of the event's canonical bytes, compared in constant time. Its
    commands carry a verified external callback (`callback_id` "<origin>:<key>")."""

    def __init__(self, name: str, secret: bytes) -> None:
        super().__init__(name)
        if not isinstance(secret, bytes) or len(secret) < 16:
            raise ValueError("an HMAC origin's secret is at least 16 bytes")
        self._secret = secret

    def sign(self, payload: bytes) -> str:
        """The signature of `payload` (what the sender computes)."""
        return hmac.new(self._secret, payload, hashlib.sha256).hexdigest()

    def verify(self, payload: bytes, signature: str | None) -> bool:
        if not isinstance(signature, str) or not signature.isascii():
            return False
        return hmac.compare_digest(self.sign(payload), signature.strip().lower())

    def command_origin(self, event: ServerEvent) -> CommandOrigin:
        return ExternalCallback(
            callback_id=f"{self.name}:{event.idempotency_key}", signature_verified=True
        )


class TrustedOrigin(EventOrigin):
    """Code inside the deployment (a scheduler, an admin task): its events need no signature
    and its commands carry the server's own policy (`policy_key` "event:<origin>")."""

    @property
    def requires_signature(self) -> bool:
        return False

    def verify(self, payload: bytes, signature: str | None) -> bool:
        return True

    def command_origin(self, event: ServerEvent) -> CommandOrigin:
        return InternalPolicy(policy_key=f"event:{self.name}")
