"""What an adopter's own port notes of its calls (`note_model_call`) reaches the record only
where the record can keep it: a digest that is not a `sha256:` digest is left out, never a
crash of the turn."""

from __future__ import annotations

import pytest

from turnframe_core.understanding import Brief, Understanding
from turnframe_runtime.calls import ModelCall, note_model_call
from turnframe_test.sample.desk import DeskHarness

GOOD = "sha256:" + "ab" * 32


class NotingInterpreter:
    """An adopter's interpreter that notes its call as it likes and understands nothing."""

    model_name = "in-house"

    def __init__(self, digest: str | None) -> None:
        self.digest = digest

    async def understand(self, brief: Brief) -> Understanding:
        note_model_call(ModelCall("in-house", "in-house-7b", self.digest, 3, 4, "req_1"))
        return Understanding()


@pytest.mark.parametrize(
    "digest",
    [
        "x" * 150,
        "sha256:" + "0" * 63,
        "sha256:" + "G" * 64,
        "md5:" + "0" * 32,
        "sha256:" + "0" * 64 + "\n",
        "",
    ],
)
async def test_a_noted_digest_the_record_cannot_keep_is_left_out(digest: str) -> None:
    desk = DeskHarness(interpreter=NotingInterpreter(digest))
    desk.ready_trip()
    turn = await desk.say("Name Grace Hopper")
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    [call] = record.provider_attempts
    assert (call.provider, call.model, call.prompt_digest) == ("in-house", "in-house-7b", None)
    assert (call.input_tokens, call.output_tokens) == (3, 4)


async def test_a_noted_sha256_digest_is_kept() -> None:
    desk = DeskHarness(interpreter=NotingInterpreter(GOOD))
    desk.ready_trip()
    turn = await desk.say("Name Grace Hopper")
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    [call] = record.provider_attempts
    assert call.prompt_digest == GOOD


class CarelessInterpreter:
    """An adopter's interpreter whose note holds values of the wrong kind altogether."""

    model_name = "in-house"

    async def understand(self, brief: Brief) -> Understanding:
        note_model_call(ModelCall(7, None, b"sha256:", -1, 2**70, 42))  # type: ignore[arg-type]
        return Understanding()


async def test_a_note_of_the_wrong_kinds_is_recorded_as_unspecified_not_a_crash() -> None:
    desk = DeskHarness(interpreter=CarelessInterpreter())
    desk.ready_trip()
    turn = await desk.say("Name Grace Hopper")
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    [call] = record.provider_attempts
    assert (call.provider, call.model, call.outcome) == ("unspecified", "in-house", "succeeded")
    assert (call.prompt_digest, call.input_tokens, call.output_tokens) == (None, None, None)
    assert call.request_id is None
