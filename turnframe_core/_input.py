"""What a client sends (internal): the base of input models, whose every refusal is one typed error.

`InputModel` turns pydantic's field errors into `InvalidTurnInput` (code
`turnframe.turn.invalid_input`) naming the refused fields and the rules they broke, never their
values; errors a model's own rules raise are Turnframe errors already and pass unchanged. An input
model nested in another is judged with it, so one refusal lists every field of the whole input.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Annotated, Any, Final

from pydantic import (
    StringConstraints,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    model_validator,
)

from turnframe_core import codes
from turnframe_core.errors import TurnframeError
from turnframe_core.model import FrozenModel

__all__ = ["LOCALE_PATTERN", "MAX_LOCALE_CHARS", "InputModel", "InvalidTurnInput", "LocaleTag"]


class InvalidTurnInput(TurnframeError):
    """What a user sent is refused (a wrong type, a value out of range, a broken rule); nothing
    was written. `fields` names the refused fields (dotted paths), never their values."""

    code = codes.TURN_INVALID_INPUT

    def __init__(self, message: str, fields: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.fields = fields


MAX_LOCALE_CHARS: Final = 35
# BCP 47 (RFC 5646) language tags: language[-script][-region](-variant)*(-extension)*[-x-private].
# ASCII letters, digits and hyphens only; grandfathered irregular tags are not accepted.
_LANGUAGE = r"(?:[A-Za-z]{2,3}(?:-[A-Za-z]{3}){0,3}|[A-Za-z]{4,8})"
_SCRIPT = r"(?:-[A-Za-z]{4})?"
_REGION = r"(?:-(?:[A-Za-z]{2}|[0-9]{3}))?"
_VARIANTS = r"(?:-(?:[A-Za-z0-9]{5,8}|[0-9][A-Za-z0-9]{3}))*"
_EXTENSIONS = r"(?:-[0-9A-WYZa-wyz](?:-[A-Za-z0-9]{2,8})+)*"
_PRIVATE = r"(?:-[Xx](?:-[A-Za-z0-9]{1,8})+)?"
LOCALE_PATTERN: Final = f"^{_LANGUAGE}{_SCRIPT}{_REGION}{_VARIANTS}{_EXTENSIONS}{_PRIVATE}$"
#: A BCP 47 language tag of at most 35 characters (`en`, `it`, `en-GB`, `zh-Hant-TW`).
LocaleTag = Annotated[
    str, StringConstraints(min_length=2, max_length=MAX_LOCALE_CHARS, pattern=LOCALE_PATTERN)
]

_SHOWN_ERRORS: Final = 5
_SHOWN_KEY_CHARS: Final = 40
# Set while an input model is being judged, so a nested one lets its errors reach the outermost.
_judging: ContextVar[bool] = ContextVar("turnframe_input_judging", default=False)


class InputModel(FrozenModel):
    """A model built from what a client sent: every refusal raises `InvalidTurnInput`.

    Read from storage (validation context `STORED_CONTEXT`), what an earlier version accepted
    and stored still reads: a model that refuses it under today's rules gets `_as_stored`."""

    @model_validator(mode="wrap")
    @classmethod
    def _typed_refusal(
        cls, data: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:
        if _judging.get():
            return handler(data)
        token = _judging.set(True)
        try:
            return handler(data)
        except ValidationError as refused:
            stored = bool((info.context or {}).get("turnframe_stored"))
            if stored and isinstance(data, dict):
                kept = cls._as_stored(data)
                if kept is not None:
                    return kept
            raise _refusal(cls.__name__, refused) from None
        finally:
            _judging.reset(token)

    @classmethod
    def _as_stored(cls, data: dict[str, Any]) -> Any:
        """This model as an earlier version's rules stored it, or None when those refuse it too
        (then the data is damaged)."""
        return None


def _refusal(model: str, refused: ValidationError) -> InvalidTurnInput:
    rules: dict[str, str] = {}  # place -> its rule, in order, each place once
    for error in refused.errors(include_url=False, include_context=False, include_input=False):
        place = ".".join(str(part)[:_SHOWN_KEY_CHARS] for part in error["loc"]) or "(the input)"
        rules.setdefault(place, f"{place} ({error['type']})")
    shown = ", ".join(list(rules.values())[:_SHOWN_ERRORS])
    more = len(rules) - _SHOWN_ERRORS
    suffix = f" and {more} more" if more > 0 else ""
    return InvalidTurnInput(f"{model} refused at {shown}{suffix}", tuple(rules))
