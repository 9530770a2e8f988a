"""A provider reply that is not the shape its API promises (a gateway's HTML page, a choice
without a message, a message without content) ends the turn as a typed model failure with a
stable code, nothing written; it never reaches the runtime as a raw exception."""

from __future__ import annotations

import pytest
from model_exchanges import Replay

from turnframe_core import codes
from turnframe_runtime.models import AnthropicInterpreter, OpenAIInterpreter
from turnframe_test.sample.desk import DeskHarness


def _openai(replay: Replay) -> DeskHarness:
    return DeskHarness(interpreter=OpenAIInterpreter("gpt-4.1-mini", client=replay.openai()))


def _anthropic(replay: Replay) -> DeskHarness:
    return DeskHarness(
        interpreter=AnthropicInterpreter("claude-sonnet-4-5", client=replay.anthropic())
    )


@pytest.mark.parametrize(
    ("exchange", "desk_on", "code"),
    [
        ("openai_interpret_html_page", _openai, codes.MODEL_UNAVAILABLE),
        ("openai_interpret_no_message", _openai, codes.AUTHORSHIP_MALFORMED_OUTPUT),
        ("anthropic_interpret_html_page", _anthropic, codes.MODEL_UNAVAILABLE),
        ("anthropic_interpret_empty", _anthropic, codes.AUTHORSHIP_MALFORMED_OUTPUT),
        ("anthropic_interpret_null_content", _anthropic, codes.AUTHORSHIP_MALFORMED_OUTPUT),
    ],
)
async def test_a_reply_of_the_wrong_shape_is_a_typed_model_failure_with_nothing_written(
    exchange: str, desk_on: object, code: str
) -> None:
    replay = Replay(exchange)
    desk = desk_on(replay)  # type: ignore[operator]
    desk.ready_trip()
    before = desk.revision()
    turn = await desk.say("Name Grace Hopper")
    assert desk.revision() == before
    assert desk.receipt_codes(turn) == []
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    [call] = record.provider_attempts
    assert (call.outcome, call.code) == ("failed", code)
    notices = [b.code for b in turn.blocks if getattr(b, "kind", None) == "notice"]
    assert codes.NOTICE_MESSAGE_UNREADABLE in notices


async def test_an_anthropic_reply_without_usage_is_read_and_its_tokens_left_unknown() -> None:
    replay = Replay("anthropic_interpret_no_usage")
    desk = _anthropic(replay)
    desk.ready_trip()
    turn = await desk.say("Name Grace Hopper")
    assert desk.desk.trip("acct_1", "T-100").state["name"] == "Grace Hopper"  # type: ignore[union-attr]
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    [call] = record.provider_attempts
    assert (call.outcome, call.input_tokens, call.output_tokens) == ("succeeded", None, None)
