"""OpenAI, and any server that speaks OpenAI's chat completions API (`base_url`: Ollama, vLLM,
llama.cpp...): the schema travels as a strict `json_schema` response format."""

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
from turnframe_runtime.models._schema import decode, strict_schema

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = [
    "OpenAIOptions",
    "COMPATIBLE_API_KEY_VARIABLE",
    "OPENAI_BASE_URL",
    "OpenAIChat",
    "OpenAIInterpreter",
    "OpenAINarrator",
    "OpenAIReviewer",
]

#: Where OpenAI itself is reached; OPENAI_BASE_URL is not followed, so a call the record names
#: "openai" went to OpenAI.
OPENAI_BASE_URL = "https://api.openai.com/v1"

#: The key for a server reached by `base_url` when none is passed; OPENAI_API_KEY is never sent
#: to another host.
COMPATIBLE_API_KEY_VARIABLE = "TURNFRAME_OPENAI_COMPATIBLE_API_KEY"

#: A key for servers that want none (a local OpenAI-compatible one reached by `base_url`).
_NO_KEY = "not-needed"


def _sdk() -> Any:
    try:
        return importlib.import_module("openai")
    except ImportError:
        raise MissingModelExtra("openai") from None


class OpenAIChat(Transport):
    """Chat completions with a strict JSON schema response format.

    `client`: an `openai.AsyncOpenAI` to use (tests pass one over a mock transport); else one
    is built from `api_key`, `base_url`, `timeout` and `max_retries`. Without `base_url` the
    provider is "openai", reached at `OPENAI_BASE_URL` with `api_key` or OPENAI_API_KEY. With
    `base_url` it is "openai-compatible", and its key is `api_key`, else
    TURNFRAME_OPENAI_COMPATIBLE_API_KEY, else none: OPENAI_API_KEY never goes to another
    host."""

    def __init__(
        self,
        model: str,
        *,
        client: AsyncOpenAI | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 1,
        max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS,
    ) -> None:
        super().__init__(model, max_output_tokens=max_output_tokens)
        self.sdk = _sdk()
        self.provider = "openai-compatible" if base_url is not None else "openai"
        if client is None:
            if base_url is None:
                key = api_key or os.environ.get("OPENAI_API_KEY")
                if not key:
                    raise MissingApiKey("OPENAI_API_KEY")
            else:
                key = api_key or os.environ.get(COMPATIBLE_API_KEY_VARIABLE) or _NO_KEY
            client = self.sdk.AsyncOpenAI(
                api_key=key,
                base_url=base_url if base_url is not None else OPENAI_BASE_URL,
                timeout=timeout,
                max_retries=max_retries,
            )
        self.client = client

    async def ask(self, ask: Ask, noted: Callable[[Usage], None]) -> Any:
        sdk = self.sdk
        try:
            completion = await self.client.chat.completions.create(
                model=self.model_name,
                messages=[
                    {"role": "system", "content": ask.system},
                    {"role": "user", "content": ask.user},
                ],
                response_format={
                    "type": "json_schema",
                    "json_schema": {
                        "name": ask.name,
                        "schema": strict_schema(ask.schema),
                        "strict": True,
                    },
                },
                max_completion_tokens=self.max_output_tokens,
            )
        except sdk.APITimeoutError:
            raise ModelTimeout("the model did not answer in time") from None
        except sdk.RateLimitError:
            raise ModelRateLimited("the provider refused the call for its rate limits") from None
        except (sdk.AuthenticationError, sdk.PermissionDeniedError):
            raise ModelUnauthorized("the provider refused the key") from None
        except sdk.APIError as failed:  # connection, server and client errors alike
            raise ModelUnavailable(f"the provider failed ({type(failed).__name__})") from None
        if not isinstance(completion, sdk.types.chat.ChatCompletion):
            raise ModelUnavailable("the provider's reply is not a chat completion")
        usage = getattr(completion, "usage", None)
        noted(
            Usage(
                input_tokens=whole(getattr(usage, "prompt_tokens", None)),
                output_tokens=whole(getattr(usage, "completion_tokens", None)),
                request_id=text_or_none(getattr(completion, "id", None)),
            )
        )
        choices = getattr(completion, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise MalformedModelOutput("the provider answered with no choice")
        choice = choices[0]
        message = getattr(choice, "message", None)
        if message is None:
            raise MalformedModelOutput("the provider's choice holds no message")
        finish = getattr(choice, "finish_reason", None)
        if getattr(message, "refusal", None) or finish == "content_filter":
            raise ModelRefused("the model declined to answer")
        if finish == "length":
            raise ModelTruncated("the model's answer was cut off at its output limit")
        return decode(getattr(message, "content", None))


class OpenAIOptions(TypedDict, total=False):
    """How `OpenAIChat` reaches the model (its arguments): every OpenAI port takes them."""

    client: AsyncOpenAI
    base_url: str | None
    api_key: str | None
    timeout: float
    max_retries: int
    max_output_tokens: int


class OpenAIInterpreter(InterpreterAdapter):
    """An `Interpreter` on an OpenAI (or OpenAI-compatible) model; `options` as `OpenAIChat`'s."""

    def __init__(self, model: str, **options: Unpack[OpenAIOptions]) -> None:
        super().__init__(OpenAIChat(model, **options))


class OpenAINarrator(NarratorAdapter):
    """A `Narrator` on an OpenAI (or OpenAI-compatible) model: moves unless `narration="free"`."""

    def __init__(
        self,
        model: str,
        *,
        narration: Literal["structured", "free"] = "structured",
        **options: Unpack[OpenAIOptions],
    ) -> None:
        super().__init__(OpenAIChat(model, **options), narration=narration)


class OpenAIReviewer(ReviewerAdapter):
    """A `ClaimReviewer` on an OpenAI (or OpenAI-compatible) model."""

    def __init__(self, model: str, **options: Unpack[OpenAIOptions]) -> None:
        super().__init__(OpenAIChat(model, **options))
