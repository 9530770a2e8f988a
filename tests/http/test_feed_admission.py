"""A feed is answered as soon as its reader is admitted (counted, its conversation found), not
when its first turn arrives nor after a keepalive interval: a client that opens the feed of a
conversation with no stored turn yet, then posts the first turn, gets the answer's headers at
once and the turn as its first frame. Keepalives are set far beyond the test's wait, so only the
admission can answer in time."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from http_api import ACCOUNT, CONVERSATION, Api, served
from sse_reader import read_frames_async

from turnframe_runtime.http import HttpLimits


@pytest.fixture
def api_options() -> dict[str, Any]:
    return {"limits": HttpLimits(keepalive_s=600)}


async def test_a_quiet_conversations_feed_is_answered_on_admission(api: Api) -> None:
    api.script_name()
    desk = api.desk
    await desk.stores.conversations.ensure_conversation(ACCOUNT, CONVERSATION)
    async with served(api.app) as client:
        opening = client.stream(
            "GET", f"/conversations/{CONVERSATION}/feed", headers={"x-account": ACCOUNT}
        )
        feed = await asyncio.wait_for(opening.__aenter__(), 5)
        try:
            assert feed.status_code == 200
            frames = read_frames_async(feed.aiter_text())
            posted = await client.post(
                f"/conversations/{CONVERSATION}/turns",
                json={"text": "Name Grace Hopper"},
                headers={"x-account": ACCOUNT, "accept": "application/json"},
            )
            assert posted.status_code == 200, posted.text
            frame = await asyncio.wait_for(anext(frames), 5)
        finally:
            await opening.__aexit__(None, None, None)

    assert (frame.event, frame.id) == ("turn", "1")
    assert json.loads(frame.data)["turn_id"] == posted.json()["turn"]["turn_id"]
