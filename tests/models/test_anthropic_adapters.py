"""The Anthropic adapters on recorded exchanges: every way a call can fail ends the turn as a
model failure does, nothing written, and the record names the call."""

from __future__ import annotations

import pytest
from model_exchanges import Replay

from turnframe_core import codes
from turnframe_runtime.models import AnthropicInterpreter, prompt
from turnframe_test.sample.desk import DeskHarness


@pytest.mark.parametrize(
    ("exchange", "code", "notice"),
    [
        ("anthropic_interpret_malformed", codes.AUTHORSHIP_MALFORMED_OUTPUT, None),
        ("anthropic_interpret_refusal", codes.MODEL_REFUSED, None),
        ("anthropic_interpret_truncated", codes.MODEL_TRUNCATED, None),
        ("anthropic_interpret_rate_limit", codes.MODEL_RATE_LIMITED, None),
        ("anthropic_interpret_timeout", codes.MODEL_TIMEOUT, None),
        (
            "anthropic_interpret_unoffered_handle",
            codes.UNDERSTANDING_REJECTED,
            codes.NOTICE_NOT_UNDERSTOOD,
        ),
    ],
)
async def test_a_failed_call_ends_the_turn_as_a_model_failure_with_nothing_written(
    exchange: str, code: str, notice: str | None
) -> None:
    replay = Replay(exchange)
    interpreter = AnthropicInterpreter("claude-sonnet-4-5", client=replay.anthropic())
    desk = DeskHarness(interpreter=interpreter)
    desk.ready_trip()
    before = desk.revision()
    turn = await desk.say("Name Grace Hopper")
    assert desk.revision() == before
    assert desk.receipt_codes(turn) == []
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    [call] = record.provider_attempts
    assert (call.provider, call.outcome, call.code) == ("anthropic", "failed", code)
    assert call.prompt_digest == prompt("interpret").digest
    notices = [b.code for b in turn.blocks if getattr(b, "kind", None) == "notice"]
    assert (notice or codes.NOTICE_MESSAGE_UNREADABLE) in notices


async def test_a_truncated_answer_still_records_the_tokens_it_cost() -> None:
    replay = Replay("anthropic_interpret_truncated")
    desk = DeskHarness(
        interpreter=AnthropicInterpreter("claude-sonnet-4-5", client=replay.anthropic())
    )
    desk.ready_trip()
    turn = await desk.say("Name Grace Hopper")
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    [call] = record.provider_attempts
    assert (call.input_tokens, call.output_tokens, call.request_id) == (1430, 2048, "msg_rec1")
