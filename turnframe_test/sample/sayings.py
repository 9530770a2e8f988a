"""Fixed sayings of the travel desk and an interpreter that reads them: what the real-process
runs, the adopter-suite examples and the demo-free tests send as a user's words."""

from __future__ import annotations

from typing import Any

from turnframe_core import Brief, Understanding
from turnframe_test.understandings import act, understanding

__all__ = ["SAYINGS", "SayingsInterpreter"]

#: What a user of the shared desk may write, and the one act each saying means (on the
#: conversation's trip, handle h1).
SAYINGS: dict[str, Any] = {
    "Name Grace Hopper": act("a1", "trip.set_name", "h1", "Grace", name="Grace Hopper"),
    "Email grace@example.com": act(
        "a1", "trip.set_email", "h1", "grace@example.com", email="grace@example.com"
    ),
    "Rebook the outbound flight": act(
        "a1", "trip.request_rebooking", "h1", "Rebook the outbound", leg="outbound"
    ),
    "Rebook the return flight": act(
        "a1", "trip.request_rebooking", "h1", "Rebook the return", leg="return"
    ),
    "Withdraw my trip": act("a1", "trip.withdraw", "h1", "Withdraw my trip"),
}


class SayingsInterpreter:
    """Each saying means its one act (a function of the words alone, so any process reads a
    message the same way); other words mean nothing."""

    async def understand(self, brief: Brief) -> Understanding:
        saying = SAYINGS.get(brief.text or "")
        return understanding(saying) if saying is not None else understanding()
