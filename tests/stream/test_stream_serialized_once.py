"""Each stream event is serialized once per commit: the JSON a store judges a bundle's events by
(before it writes anything) is the JSON it logs, not a second rendering of them."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from turnframe_core import TurnInput
from turnframe_store.roles.conversations import STREAM_EVENT_TYPES
from turnframe_test import DeskHarness, act, understanding


async def test_each_logged_stream_event_is_serialized_once(
    desk: DeskHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    desk.ready_trip()
    desk.interpreter.then(
        understanding(act("a1", "trip.set_name", "h1", "Grace", name="Grace Hopper"))
    )
    serialized: Counter[tuple[str, int]] = Counter()
    for cls in STREAM_EVENT_TYPES:
        real = cls.model_dump_json

        def counted(self: Any, *args: Any, __real: Any = real, **kwargs: Any) -> str:
            serialized[(self.type, self.sequence)] += 1
            return str(__real(self, *args, **kwargs))

        monkeypatch.setattr(cls, "model_dump_json", counted)
    turn_input = TurnInput(
        account_id="acct_1", conversation_id="conv_1", text="Name Grace Hopper", turn_id="turn_1"
    )
    events = [event async for event in desk.runtime.stream_turn(turn_input, mode="tokens")]
    assert events, "the turn was streamed"
    assert set(serialized) == {(event.type, event.sequence) for event in events}
    assert set(serialized.values()) == {1}, serialized
