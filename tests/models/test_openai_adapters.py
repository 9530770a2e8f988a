"""The OpenAI adapters on recorded exchanges: a turn of the travel desk read by a real adapter,
and every way a call can fail ending the turn as a model failure does, nothing written."""

from __future__ import annotations

import pytest
from model_exchanges import Replay

from turnframe_core import codes
from turnframe_runtime.models import OpenAIInterpreter, prompt
from turnframe_test.sample.desk import DeskHarness

NAME = "trip.set_name"


async def test_an_openai_interpreter_reads_a_turn_of_the_travel_desk() -> None:
    replay = Replay("openai_interpret_set_name")
    desk = DeskHarness(interpreter=OpenAIInterpreter("gpt-4.1-mini", client=replay.openai()))
    desk.ready_trip()
    turn = await desk.say("Name Grace Hopper")
    assert desk.desk.trip("acct_1", "T-100").state["name"] == "Grace Hopper"  # type: ignore[union-attr]
    assert replay.used_up
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    [call] = record.provider_attempts
    assert (call.provider, call.model, call.outcome) == ("openai", "gpt-4.1-mini", "succeeded")
    assert call.prompt_digest == prompt("interpret").digest
    assert (call.input_tokens, call.output_tokens) == (812, 64)
    assert call.request_id == "chatcmpl-rec1"


async def test_the_schema_offers_only_what_the_brief_offers() -> None:
    replay = Replay("openai_interpret_set_name")
    desk = DeskHarness(interpreter=OpenAIInterpreter("gpt-4.1-mini", client=replay.openai()))
    desk.ready_trip()
    await desk.say("Name Grace Hopper")
    schema = replay.requests[0]["response_format"]["json_schema"]["schema"]
    act = schema["properties"]["acts"]["items"]
    operations = [o["properties"]["operation"]["enum"] for o in act.get("anyOf", [act])]
    assert all(len(names) == 1 for names in operations)
    offered = {names[0] for names in operations}
    assert NAME in offered
    handles = {
        h
        for o in act.get("anyOf", [act])
        for t in o["properties"]["target"].get("anyOf", [o["properties"]["target"]])
        for h in t["properties"].get("handle", {}).get("enum", [])
    }
    assert handles == {"h1"}
    assert "Grace Hopper" in replay.requests[0]["messages"][1]["content"]


@pytest.mark.parametrize(
    ("exchange", "code", "notice"),
    [
        ("openai_interpret_malformed", codes.AUTHORSHIP_MALFORMED_OUTPUT, None),
        ("openai_interpret_refusal", codes.MODEL_REFUSED, None),
        ("openai_interpret_truncated", codes.MODEL_TRUNCATED, None),
        ("openai_interpret_rate_limit", codes.MODEL_RATE_LIMITED, None),
        ("openai_interpret_timeout", codes.MODEL_TIMEOUT, None),
        (
            "openai_interpret_unoffered_operation",
            codes.UNDERSTANDING_REJECTED,
            codes.NOTICE_NOT_UNDERSTOOD,
        ),
    ],
)
async def test_a_failed_call_ends_the_turn_as_a_model_failure_with_nothing_written(
    exchange: str, code: str, notice: str | None
) -> None:
    replay = Replay(exchange)
    desk = DeskHarness(interpreter=OpenAIInterpreter("gpt-4.1-mini", client=replay.openai()))
    desk.ready_trip()
    before = desk.revision()
    turn = await desk.say("Name Grace Hopper")
    assert desk.revision() == before
    assert desk.receipt_codes(turn) == []
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    [call] = record.provider_attempts
    assert (call.outcome, call.code) == ("failed", code)
    assert call.prompt_digest == prompt("interpret").digest
    notices = [b.code for b in turn.blocks if getattr(b, "kind", None) == "notice"]
    assert (notice or codes.NOTICE_MESSAGE_UNREADABLE) in notices


async def test_an_openai_compatible_server_is_reached_by_base_url() -> None:
    replay = Replay("openai_compatible_interpret_set_name")
    interpreter = OpenAIInterpreter(
        "llama3.1:8b", client=replay.openai(), base_url="http://localhost:11434/v1"
    )
    desk = DeskHarness(interpreter=interpreter)
    desk.ready_trip()
    turn = await desk.say("Name Grace Hopper")
    assert str(interpreter.transport.client.base_url) == "http://localhost:11434/v1/"  # type: ignore[attr-defined]
    assert replay.urls == ["http://localhost:11434/v1/chat/completions"]
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    [call] = record.provider_attempts
    assert (call.provider, call.model, call.outcome) == (
        "openai-compatible",
        "llama3.1:8b",
        "succeeded",
    )
