"""Anthropic's messages API: the schema travels as the input schema of one tool the model must
call; the tool call's input is the answer."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack

from turnframe_core.blocks import MalformedModelOutput
from turnframe_runtime.models._failures import (
    MissingApiKey,
    MissingModelExtra,
    ModelRateLimited,
    ModelRefused,
    ModelTimeout,
    ModelTruncated,
    ModelUnauthorized,
    ModelUnavailable,
)
from turnframe_runtime.models._ports import (
    DEFAULT_MAX_OUTPUT_TOKENS,
    Ask,
    InterpreterAdapter,
    NarratorAdapter,
    ReviewerAdapter,
    Transport,
    Usage,
    text_or_none,
    whole,
)
from turnframe_runtime.models._schema import checked

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = [
    "AnthropicOptions",
    "AnthropicInterpreter",
    "AnthropicMessages",
    "AnthropicNarrator",
    "AnthropicReviewer",
]


def _sdk() -> Any:
    try:
        return importlib.import_module("anthropic")
    except ImportError:
        raise MissingModelExtra("anthropic") from None


class AnthropicMessages(Transport):
    """Messages with one forced tool whose input schema is the answer's.

    `client`: an `anthropic.AsyncAnthropic` to use (tests pass one over a mock transport); else
    one is built from `api_key` (or `ANTHROPIC_API_KEY`), `base_url`, `timeout` and
    `max_retries`."""

    provider = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        client: AsyncAnthropic | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 1,
        max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS,
    ) -> None:
        super().__init__(model, max_output_tokens=max_output_tokens)
        self.sdk = _sdk()
        if client is None:
            key = api_key or os.environ.get("ANTHROPIC_API_KEY")
            if not key:
                raise MissingApiKey("ANTHROPIC_API_KEY")
            client = self.sdk.AsyncAnthropic(
                api_key=key, base_url=base_url, timeout=timeout, max_retries=max_retries
            )
        self.client = client

    async def ask(self, ask: Ask, noted: Callable[[Usage], None]) -> Any:
        sdk = self.sdk
        try:
            message = await self.client.messages.create(
                model=self.model_name,
                max_tokens=self.max_output_tokens,
                system=ask.system,
                messages=[{"role": "user", "content": ask.user}],
                tools=[
                    {
                        "name": ask.name,
                        "description": f"Give the {ask.name} as the schema describes it.",
                        "input_schema": ask.schema,
                    }
                ],
                tool_choice={"type": "tool", "name": ask.name},
            )
        except sdk.APITimeoutError:
            raise ModelTimeout("the model did not answer in time") from None
        except sdk.RateLimitError:
            raise ModelRateLimited("the provider refused the call for its rate limits") from None
        except (sdk.AuthenticationError, sdk.PermissionDeniedError):
            raise ModelUnauthorized("the provider refused the key") from None
        except sdk.APIError as failed:  # connection, server and client errors alike
            raise ModelUnavailable(f"the provider failed ({type(failed).__name__})") from None
        if not isinstance(message, sdk.types.Message):
            raise ModelUnavailable("the provider's reply is not a message")
        usage = getattr(message, "usage", None)
        noted(
            Usage(
                input_tokens=whole(getattr(usage, "input_tokens", None)),
                output_tokens=whole(getattr(usage, "output_tokens", None)),
                request_id=text_or_none(getattr(message, "id", None)),
            )
        )
        stop = getattr(message, "stop_reason", None)
        if stop == "refusal":
            raise ModelRefused("the model declined to answer")
        if stop == "max_tokens":
            raise ModelTruncated("the model's answer was cut off at its output limit")
        content = getattr(message, "content", None)
        blocks = content if isinstance(content, list) else []
        calls = [
            getattr(block, "input", None)
            for block in blocks
            if getattr(block, "type", None) == "tool_use"
            and getattr(block, "name", None) == ask.name
        ]
        if len(calls) != 1:
            raise MalformedModelOutput("the model did not answer through its one tool")
        return checked(calls[0])


class AnthropicOptions(TypedDict, total=False):
    """How `AnthropicMessages` reaches the model (its arguments), for every Anthropic port."""

    client: AsyncAnthropic
    base_url: str | None
    api_key: str | None
    timeout: float
    max_retries: int
    max_output_tokens: int


class AnthropicInterpreter(InterpreterAdapter):
    """An `Interpreter` on an Anthropic model; `options` as `AnthropicMessages`'s."""

    def __init__(self, model: str, **options: Unpack[AnthropicOptions]) -> None:
        super().__init__(AnthropicMessages(model, **options))


class AnthropicNarrator(NarratorAdapter):
    """A `Narrator` on an Anthropic model: moves unless `narration="free"`."""

    def __init__(
        self,
        model: str,
        *,
        narration: Literal["structured", "free"] = "structured",
        **options: Unpack[AnthropicOptions],
    ) -> None:
        super().__init__(AnthropicMessages(model, **options), narration=narration)


class AnthropicReviewer(ReviewerAdapter):
    """A `ClaimReviewer` on an Anthropic model."""

    def __init__(self, model: str, **options: Unpack[AnthropicOptions]) -> None:
        super().__init__(AnthropicMessages(model, **options))
