"""`scripts/record-exchange` writes what a replay needs, and what it writes replays: recorded
here against a provider stood in for by a recorded exchange, so no network is touched."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import httpx2
from model_exchanges import Replay

from turnframe_core import TransitionBlock
from turnframe_runtime.models import OpenAIInterpreter, OpenAINarrator
from turnframe_test.sample.desk import DeskHarness

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "record-exchange"


class _Provider(httpx2.AsyncBaseTransport):
    """Answers each port from its recorded exchange, as the provider did."""

    def __init__(self) -> None:
        self.replays = {
            "interpret": Replay("openai_interpret_set_name"),
            "narrate": Replay("openai_narrate_set_name"),
        }

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        name = json.loads(request.content)["response_format"]["json_schema"]["name"]
        replay = self.replays["interpret" if name == "understanding" else "narrate"]
        response = replay.handler(request)
        return httpx2.Response(
            response.status_code,
            headers={**response.headers, "x-secret-header": "sk-do-not-keep"},
            content=response.content,
            request=request,
        )


async def test_a_recording_keeps_no_secret_and_replays(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-keep")
    script = runpy.run_path(str(SCRIPT), run_name="record_exchange")
    written = await script["record"](
        "openai", "gpt-4.1-mini", "fresh", out=tmp_path, inner=_Provider()
    )
    assert sorted(p.name for p in written) == ["fresh_interpret.json", "fresh_narrate.json"]
    for path in written:
        assert "sk-do-not-keep" not in path.read_text("utf-8")
    assert "$receipt" in (tmp_path / "fresh_narrate.json").read_text("utf-8")

    monkeypatch.setattr("model_exchanges.EXCHANGES", tmp_path)
    heard, told = Replay("fresh_interpret"), Replay("fresh_narrate")
    desk = DeskHarness(
        interpreter=OpenAIInterpreter("gpt-4.1-mini", client=heard.openai()),
        narrator=OpenAINarrator("gpt-4.1-mini", client=told.openai()),
    )
    desk.ready_trip()
    turn = await desk.say("Name Grace Hopper")
    assert desk.receipt_codes(turn) == ["trip.name_set"]
    assert [b.author for b in turn.blocks if isinstance(b, TransitionBlock)] == ["model"]


def test_the_recorder_and_the_replay_share_one_placeholder_rule() -> None:
    """A ref the recorder writes as `$kind` is the ref the replay fills back in: one function
    pair in `model_exchanges`, which the script imports rather than restating."""
    import model_exchanges

    script = runpy.run_path(str(SCRIPT), run_name="record_exchange")
    assert script["placeheld"] is model_exchanges.placeheld
    refs = [{"kind": "receipt", "ref": "blk_r1"}, {"kind": "receipt", "ref": "blk_r2"}]
    sent = {"messages": [{"role": "user", "content": json.dumps({"refs": refs})}]}
    answer = '{"ref": "blk_r1", "other": "blk_r2"}'
    held = model_exchanges.placeheld(answer, sent)
    assert held == '{"ref": "$receipt", "other": "blk_r2"}'
    assert model_exchanges.filled(held, sent) == answer
