"""A narrator or reviewer adapter that fails, or answers with what the turn does not offer,
never puts words before the user: server copy stands in, and the record says why."""

from __future__ import annotations

from model_exchanges import Replay

from turnframe_core import TransitionBlock, codes
from turnframe_runtime.models import (
    AnthropicReviewer,
    OpenAIInterpreter,
    OpenAINarrator,
)
from turnframe_test.sample.desk import DeskHarness


def _desk(narrator: OpenAINarrator, **ports: object) -> DeskHarness:
    heard = Replay("openai_interpret_set_name")
    desk = DeskHarness(
        interpreter=OpenAIInterpreter("gpt-4.1-mini", client=heard.openai()),
        narrator=narrator,
        **ports,  # type: ignore[arg-type]
    )
    desk.ready_trip()
    return desk


async def test_moves_naming_a_block_the_turn_does_not_hold_are_never_rendered() -> None:
    told = Replay("openai_narrate_unoffered_ref")
    desk = _desk(OpenAINarrator("gpt-4.1-mini", client=told.openai()))
    turn = await desk.say("Name Grace Hopper")
    [transition] = [b for b in turn.blocks if isinstance(b, TransitionBlock)]
    assert transition.author == "server"
    assert told.used_up  # one rewrite was asked for, with the finding
    assert "names nothing of this turn" in told.requests[1]["messages"][0]["content"]
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    drafts = [(a.purpose, a.code) for a in record.provider_attempts if a.purpose == "transition"]
    assert drafts == [("transition", codes.NARRATION_REF_NOT_IN_TURN)] * 2


async def test_a_rate_limited_narrator_leaves_the_words_to_server_copy() -> None:
    told = Replay("openai_narrate_rate_limit")
    desk = _desk(OpenAINarrator("gpt-4.1-mini", client=told.openai()))
    turn = await desk.say("Name Grace Hopper")
    assert desk.receipt_codes(turn) == ["trip.name_set"]  # the effect stands; only words change
    [transition] = [b for b in turn.blocks if isinstance(b, TransitionBlock)]
    assert transition.author == "server"
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    [drafted] = [a for a in record.provider_attempts if a.purpose == "transition"]
    assert (drafted.provider, drafted.code) == ("openai", codes.MODEL_RATE_LIMITED)


async def test_a_reviewer_that_times_out_lets_no_free_text_through() -> None:
    told = Replay("openai_narrate_free_set_name")
    judged = Replay("anthropic_review_timeout")
    desk = _desk(
        OpenAINarrator("gpt-4.1-mini", narration="free", client=told.openai()),
        reviewer=AnthropicReviewer("claude-sonnet-4-5", client=judged.anthropic()),
        narration="free",
    )
    turn = await desk.say("Name Grace Hopper")
    [transition] = [b for b in turn.blocks if isinstance(b, TransitionBlock)]
    assert transition.author == "server"
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    reviews = [(a.provider, a.code) for a in record.provider_attempts if a.purpose == "review"]
    assert reviews[0] == ("anthropic", codes.MODEL_TIMEOUT)
