"""What an adopter tunes on the HTTP layer: body limits and CORS."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["CorsConfig", "HttpLimits"]


@dataclass(frozen=True)
class HttpLimits:
    """Bounds on what a request may cost before anything reads it.

    - `max_body_bytes`: a larger body answers 413 (`turnframe.http.body_too_large`), unread;
    - `max_depth`: a body nesting arrays or objects deeper answers 422
      (`turnframe.http.body_too_deep`), unparsed;
    - `max_turns`: the most turns `GET /conversations/{cid}/turns?limit=` returns;
    - `keepalive_s`: an idle stream sends a `: keepalive` comment this often.
    """

    max_body_bytes: int = 65_536
    max_depth: int = 32
    max_turns: int = 200
    keepalive_s: float = 15.0

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1 or self.max_depth < 1 or self.max_turns < 1:
            raise ValueError("body, depth and turn limits are positive")
        if self.keepalive_s <= 0:
            raise ValueError("keepalive_s is a positive number of seconds")


@dataclass(frozen=True)
class CorsConfig:
    """Cross-origin access for browsers on `allow_origins` (exact origins, or `"*"`). Without a
    `CorsConfig` the app sends no CORS header at all. The turn id header (`x-turn-id`) is exposed;
    the headers the routes read (`content-type`, `last-event-id`, `authorization`,
    `x-turnframe-signature`) are allowed, with `allow_headers` added."""

    allow_origins: Sequence[str]
    allow_credentials: bool = False
    allow_headers: Sequence[str] = field(default=())
    max_age_s: int = 600

    def __post_init__(self) -> None:
        if isinstance(self.allow_origins, str):
            raise TypeError("allow_origins is a sequence of origins, not one string")
        if self.allow_credentials and "*" in self.allow_origins:
            raise ValueError("credentials are never allowed for every origin")
