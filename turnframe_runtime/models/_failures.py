"""The typed failures a model adapter raises. Each carries a stable code the replay record and
the turn's notice name; no message holds a key, a prompt or the model's words."""

from __future__ import annotations

from turnframe_core import codes
from turnframe_core.errors import TurnframeError

__all__ = [
    "MissingApiKey",
    "MissingModelExtra",
    "ModelFailure",
    "ModelRateLimited",
    "ModelRefused",
    "ModelTimeout",
    "ModelTruncated",
    "ModelUnauthorized",
    "ModelUnavailable",
]


class ModelFailure(TurnframeError):
    """A model call that gave no answer to read; the turn ends as any model failure does."""

    code = codes.MODEL_UNAVAILABLE


class ModelTimeout(ModelFailure):
    code = codes.MODEL_TIMEOUT


class ModelRateLimited(ModelFailure):
    code = codes.MODEL_RATE_LIMITED


class ModelRefused(ModelFailure):
    code = codes.MODEL_REFUSED


class ModelTruncated(ModelFailure):
    code = codes.MODEL_TRUNCATED


class ModelUnauthorized(ModelFailure):
    """The provider refused the key (401, 403); the message never holds the key or the reply."""

    code = codes.MODEL_UNAUTHORIZED


class ModelUnavailable(ModelFailure):
    code = codes.MODEL_UNAVAILABLE


class MissingModelExtra(TurnframeError):
    """The adapter's SDK is not installed: install `turnframe[<extra>]`."""

    code = codes.MODEL_MISSING_EXTRA

    def __init__(self, extra: str) -> None:
        super().__init__(
            f"this adapter needs the {extra!r} extra: pip install 'turnframe[{extra}]'"
        )
        self.extra = extra


class MissingApiKey(TurnframeError):
    """No API key was given and its environment variable is unset."""

    code = codes.MODEL_MISSING_API_KEY

    def __init__(self, variable: str) -> None:
        super().__init__(f"no API key: pass api_key= or set {variable}")
        self.variable = variable
