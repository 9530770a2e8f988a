"""An answer past the size caps (`turnframe_core.limits`) is malformed output: the turn ends as
a model failure does, nothing written, whichever provider sent it."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from model_exchanges import Replay

from turnframe_core import codes
from turnframe_core.limits import MAX_MODEL_OUTPUT_CHARS
from turnframe_runtime.models import AnthropicInterpreter, OpenAIInterpreter
from turnframe_test.sample.desk import DeskHarness

#: A question whose text alone is past the cap.
HUGE = {
    "question_id": "q1",
    "text": "x" * (MAX_MODEL_OUTPUT_CHARS + 1),
    "about": [],
    "hypothetical": False,
}


def _oversized(provider: str) -> Replay:
    """The provider's recorded set_name answer with a question past the cap added."""
    replay = Replay(f"{provider}_interpret_set_name")
    exchange = copy.deepcopy(replay.exchange)
    body = exchange["calls"][0]["response"]["body"]
    if provider == "openai":
        message = body["choices"][0]["message"]
        answer = json.loads(message["content"])
        answer["questions"] = [HUGE]
        message["content"] = json.dumps(answer)
    else:
        body["content"][0]["input"]["questions"] = [HUGE]
    return Replay(f"{provider}_interpret_oversized", exchange)


def _interpreter(provider: str, replay: Replay) -> Any:
    if provider == "openai":
        return OpenAIInterpreter("gpt-4.1-mini", client=replay.openai())
    return AnthropicInterpreter("claude-sonnet-4-5", client=replay.anthropic())


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_an_answer_past_the_size_cap_is_malformed_and_nothing_is_written(
    provider: str,
) -> None:
    replay = _oversized(provider)
    desk = DeskHarness(interpreter=_interpreter(provider, replay))
    desk.ready_trip()
    before = desk.revision()
    turn = await desk.say("Name Grace Hopper")
    assert replay.used_up
    assert desk.revision() == before
    assert desk.receipt_codes(turn) == []
    assert desk.desk.trip("acct_1", "T-100").state.get("name") != "Grace Hopper"  # type: ignore[union-attr]
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    [call] = record.provider_attempts
    assert (call.outcome, call.code) == ("failed", codes.AUTHORSHIP_MALFORMED_OUTPUT)
