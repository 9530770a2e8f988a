"""The sample travel desk end to end through each provider's adapters on recorded exchanges:
the interpreter reads the words, the narrator narrates (moves, or free text a reviewer passes),
the replay record names every call."""

from __future__ import annotations

from typing import Any

import pytest
from model_exchanges import Replay

from turnframe_core import TransitionBlock
from turnframe_runtime.models import (
    AnthropicInterpreter,
    AnthropicNarrator,
    AnthropicReviewer,
    OpenAIInterpreter,
    OpenAINarrator,
    OpenAIReviewer,
    prompt,
)
from turnframe_test.sample.desk import DeskHarness

MODELS = {"openai": "gpt-4.1-mini", "anthropic": "claude-sonnet-4-5"}
ADAPTERS: dict[str, tuple[Any, Any, Any]] = {
    "openai": (OpenAIInterpreter, OpenAINarrator, OpenAIReviewer),
    "anthropic": (AnthropicInterpreter, AnthropicNarrator, AnthropicReviewer),
}


def _client(provider: str, replay: Replay) -> Any:
    return replay.openai() if provider == "openai" else replay.anthropic()


@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_the_travel_desk_runs_through_the_adapters_with_moves(provider: str) -> None:
    interpreting, narrating, _ = ADAPTERS[provider]
    heard, told = Replay(f"{provider}_interpret_set_name"), Replay(f"{provider}_narrate_set_name")
    model = MODELS[provider]
    desk = DeskHarness(
        interpreter=interpreting(model, client=_client(provider, heard)),
        narrator=narrating(model, client=_client(provider, told)),
    )
    desk.ready_trip()
    turn = await desk.say("Name Grace Hopper")
    assert desk.receipt_codes(turn) == ["trip.name_set"]
    [transition] = [b for b in turn.blocks if isinstance(b, TransitionBlock)]
    assert transition.author == "model"
    assert [m.move.value for m in transition.moves] == ["acknowledge", "introduce", "offer"]
    assert "Grace Hopper" in transition.text  # the receipt's words, rendered by server copy
    assert heard.used_up and told.used_up
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    calls = [(a.purpose, a.provider, a.model, a.outcome) for a in record.provider_attempts]
    assert calls == [
        ("understand", provider, model, "succeeded"),
        ("transition", provider, model, "succeeded"),
    ]
    assert [a.prompt_digest for a in record.provider_attempts] == [
        prompt("interpret").digest,
        prompt("narrate").digest,
    ]
    assert all(a.input_tokens and a.output_tokens for a in record.provider_attempts)


@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_the_travel_desk_runs_free_narration_past_a_model_reviewer(provider: str) -> None:
    interpreting, narrating, reviewing = ADAPTERS[provider]
    heard = Replay(f"{provider}_interpret_set_name")
    told = Replay(f"{provider}_narrate_free_set_name")
    judged = Replay(f"{provider}_review_pass")
    model = MODELS[provider]
    desk = DeskHarness(
        interpreter=interpreting(model, client=_client(provider, heard)),
        narrator=narrating(model, narration="free", client=_client(provider, told)),
        reviewer=reviewing(model, client=_client(provider, judged)),
        narration="free",
    )
    desk.ready_trip()
    turn = await desk.say("Name Grace Hopper")
    [transition] = [b for b in turn.blocks if isinstance(b, TransitionBlock)]
    assert (transition.author, transition.text) == (
        "model",
        "The traveller's name is now Grace Hopper.",
    )
    assert [f.kind for f in transition.facts_used] == ["operational_outcome"]
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    calls = sorted((a.purpose, a.provider, a.model, a.outcome) for a in record.provider_attempts)
    assert calls == [  # each call names its own provider, even the draft recorded after its review
        ("review", provider, model, "succeeded"),
        ("transition", provider, model, "succeeded"),
        ("understand", provider, model, "succeeded"),
    ]
    digests = {a.purpose: a.prompt_digest for a in record.provider_attempts}
    assert digests["transition"] == prompt("narrate").digest
    assert digests["review"] == prompt("review").digest
    assert heard.used_up and told.used_up and judged.used_up


async def test_the_travel_desk_runs_through_an_openai_compatible_server() -> None:
    """A local server (Ollama, vLLM, llama.cpp) by base URL, with no key: the interpreter, a
    free narrator and its reviewer all reach it, and the record names it as such."""
    local, model = "http://localhost:11434/v1", "llama3.1:8b"
    heard = Replay("openai_compatible_interpret_set_name")
    told = Replay("openai_compatible_narrate_free_set_name")
    judged = Replay("openai_compatible_review_pass")
    desk = DeskHarness(
        interpreter=OpenAIInterpreter(model, client=heard.openai(), base_url=local),
        narrator=OpenAINarrator(model, narration="free", client=told.openai(), base_url=local),
        reviewer=OpenAIReviewer(model, client=judged.openai(), base_url=local),
        narration="free",
    )
    desk.ready_trip()
    turn = await desk.say("Name Grace Hopper")
    assert desk.receipt_codes(turn) == ["trip.name_set"]
    [transition] = [b for b in turn.blocks if isinstance(b, TransitionBlock)]
    assert transition.author == "model"
    assert heard.used_up and told.used_up and judged.used_up
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    calls = sorted((a.purpose, a.provider, a.model, a.outcome) for a in record.provider_attempts)
    assert calls == [
        ("review", "openai-compatible", model, "succeeded"),
        ("transition", "openai-compatible", model, "succeeded"),
        ("understand", "openai-compatible", model, "succeeded"),
    ]
