"""A provider that refuses the key (401, 403) ends the turn as a model failure of its own code,
and the key its reply echoes shows nowhere: not in the record, the notice, the log or the
failure's text."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from model_exchanges import Replay

from turnframe_core import codes
from turnframe_runtime.models import (
    AnthropicInterpreter,
    ModelUnauthorized,
    OpenAIInterpreter,
    prompt,
)
from turnframe_runtime.models._ports import Ask
from turnframe_test.sample.desk import DeskHarness

CASES = [
    ("openai_interpret_unauthorized", "sk-test", OpenAIInterpreter, "gpt-4.1-mini"),
    ("anthropic_interpret_forbidden", "sk-ant-test", AnthropicInterpreter, "claude-sonnet-4-5"),
]


def _client(replay: Replay) -> Any:
    return replay.openai() if replay.exchange["provider"] == "openai" else replay.anthropic()


@pytest.mark.parametrize(("exchange", "key", "adapter", "model"), CASES)
async def test_a_refused_key_is_its_own_failure_and_never_shown(
    exchange: str, key: str, adapter: Any, model: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    replay = Replay(exchange)
    desk = DeskHarness(interpreter=adapter(model, client=_client(replay)))
    desk.ready_trip()
    before = desk.revision()
    turn = await desk.say("Name Grace Hopper")
    assert desk.revision() == before
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    [call] = record.provider_attempts
    assert (call.outcome, call.code) == ("failed", codes.MODEL_UNAUTHORIZED)
    assert key not in record.model_dump_json()
    assert key not in "".join(b.model_dump_json() for b in turn.blocks)
    assert key not in caplog.text


@pytest.mark.parametrize(("exchange", "key", "adapter", "model"), CASES)
async def test_the_failure_of_a_refused_key_does_not_carry_the_reply(
    exchange: str, key: str, adapter: Any, model: str
) -> None:
    replay = Replay(exchange)
    port = adapter(model, client=_client(replay))
    ask = Ask(prompt("interpret"), "system", "{}", {"type": "object"}, "understanding")
    with pytest.raises(ModelUnauthorized) as refused:
        await port.transport.ask(ask, lambda usage: None)
    assert refused.value.code == codes.MODEL_UNAUTHORIZED
    assert key not in str(refused.value) and key not in repr(refused.value)
    assert refused.value.__cause__ is None and refused.value.__suppress_context__
