"""What each provider is sent as the answer's schema: OpenAI's strict structured outputs get
only the JSON Schema keywords that mode supports (no string lengths; the parsers enforce the
limits), Anthropic's tool input schema keeps them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from model_exchanges import Replay

from turnframe_runtime.models import (
    AnthropicInterpreter,
    AnthropicNarrator,
    AnthropicReviewer,
    OpenAIInterpreter,
    OpenAINarrator,
    OpenAIReviewer,
)
from turnframe_test.sample.desk import DeskHarness

#: The keywords OpenAI's strict mode accepts (its Structured Outputs guide, "Supported
#: schemas"): minLength and maxLength are not among them.
OPENAI_STRICT_KEYWORDS = {
    "type", "properties", "required", "additionalProperties", "items", "enum", "const",
    "anyOf", "$ref", "$defs", "description", "title",
    "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minItems", "maxItems",
}  # fmt: skip


def keywords(schema: Any) -> Iterator[str]:
    """Every keyword a schema uses, at any depth (property names are not keywords)."""
    if isinstance(schema, list):
        for item in schema:
            yield from keywords(item)
        return
    if not isinstance(schema, dict):
        return
    for key, value in schema.items():
        yield key
        if key in ("properties", "$defs"):
            for inner in value.values():
                yield from keywords(inner)
        elif key in ("items", "anyOf", "additionalProperties"):
            yield from keywords(value)


async def _free_turn(interpreter: Any, narrator: Any, reviewer: Any) -> None:
    desk = DeskHarness(
        interpreter=interpreter, narrator=narrator, reviewer=reviewer, narration="free"
    )
    desk.ready_trip()
    await desk.say("Name Grace Hopper")


async def test_openai_is_sent_only_the_keywords_its_strict_mode_supports() -> None:
    heard, told = Replay("openai_interpret_set_name"), Replay("openai_narrate_free_set_name")
    judged = Replay("openai_review_pass")
    await _free_turn(
        OpenAIInterpreter("gpt-4.1-mini", client=heard.openai()),
        OpenAINarrator("gpt-4.1-mini", narration="free", client=told.openai()),
        OpenAIReviewer("gpt-4.1-mini", client=judged.openai()),
    )
    schemas = [
        r["response_format"]["json_schema"]["schema"]
        for replay in (heard, told, judged)
        for r in replay.requests
    ]
    assert len(schemas) == 3
    used = {k for schema in schemas for k in keywords(schema)}
    assert used <= OPENAI_STRICT_KEYWORDS, used - OPENAI_STRICT_KEYWORDS


async def test_anthropic_is_sent_the_string_lengths_its_tool_schema_accepts() -> None:
    heard = Replay("anthropic_interpret_set_name")
    told = Replay("anthropic_narrate_free_set_name")
    judged = Replay("anthropic_review_pass")
    await _free_turn(
        AnthropicInterpreter("claude-sonnet-4-5", client=heard.anthropic()),
        AnthropicNarrator("claude-sonnet-4-5", narration="free", client=told.anthropic()),
        AnthropicReviewer("claude-sonnet-4-5", client=judged.anthropic()),
    )
    used = {
        k for replay in (heard, told, judged) for r in replay.requests
        for k in keywords(r["tools"][0]["input_schema"])
    }  # fmt: skip
    assert {"minLength", "maxLength"} <= used
