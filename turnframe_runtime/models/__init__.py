"""Model adapters for the runtime's ports: an `Interpreter`, a `Narrator` and a `ClaimReviewer`
on OpenAI, on any OpenAI-compatible server (by `base_url`) and on Anthropic.

Each adapter offers its model the request as JSON and a JSON schema built from it that names
only what the request offers; the answer goes through the same parsers as any port's. Provider
failures arrive as typed `ModelFailure`s with stable codes; each call is noted for the replay
record (provider, model, prompt digest, tokens). The SDKs are extras: `turnframe[openai]`,
`turnframe[anthropic]`; building an adapter without its extra or its key raises at once.
"""

from turnframe_runtime.models._anthropic import (
    AnthropicInterpreter,
    AnthropicMessages,
    AnthropicNarrator,
    AnthropicReviewer,
)
from turnframe_runtime.models._failures import (
    MissingApiKey,
    MissingModelExtra,
    ModelFailure,
    ModelRateLimited,
    ModelRefused,
    ModelTimeout,
    ModelTruncated,
    ModelUnauthorized,
    ModelUnavailable,
)
from turnframe_runtime.models._openai import (
    OpenAIChat,
    OpenAIInterpreter,
    OpenAINarrator,
    OpenAIReviewer,
)
from turnframe_runtime.models._ports import (
    Ask,
    InterpreterAdapter,
    NarratorAdapter,
    ReviewerAdapter,
    Transport,
    Usage,
)
from turnframe_runtime.models._prompts import PROMPTS, Prompt, prompt
from turnframe_runtime.models._schema import draft_schema, review_schema, understanding_schema

__all__ = [
    "PROMPTS",
    "AnthropicInterpreter",
    "AnthropicMessages",
    "AnthropicNarrator",
    "AnthropicReviewer",
    "Ask",
    "InterpreterAdapter",
    "MissingApiKey",
    "MissingModelExtra",
    "ModelFailure",
    "ModelRateLimited",
    "ModelRefused",
    "ModelTimeout",
    "ModelTruncated",
    "ModelUnauthorized",
    "ModelUnavailable",
    "NarratorAdapter",
    "OpenAIChat",
    "OpenAIInterpreter",
    "OpenAINarrator",
    "OpenAIReviewer",
    "Prompt",
    "ReviewerAdapter",
    "Transport",
    "Usage",
    "draft_schema",
    "prompt",
    "review_schema",
    "understanding_schema",
]
