"""What a model or a port may hand the core: JSON values fit to keep in every store. An adapter
(the runtime's, or an adopter's own) checks a model's answer with these before it parses it.

Caps on what a model may send (DESIGN §15: model output is validated at the boundary like user
input): the JSON's length, nesting depth and number of values, and text no store refuses.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_JSON_VALUES",
    "MAX_MODEL_OUTPUT_CHARS",
    "json_value_problem",
    "unfit_text",
]

MAX_MODEL_OUTPUT_CHARS: Final = 100_000
MAX_JSON_DEPTH: Final = 24
MAX_JSON_VALUES: Final = 10_000


def json_value_problem(value: Any, *, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """Why `value` (parsed JSON, or what a port returned as such) is not fit to keep: nested
    deeper than `max_depth`, more than `MAX_JSON_VALUES` values, more than
    `MAX_MODEL_OUTPUT_CHARS` characters of text, a string with a lone surrogate or NUL, a
    non-string key, or not JSON at all. None when it is fit."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    seen = 0
    chars = 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if depth > max_depth:
            return "is nested too deeply"
        if seen > MAX_JSON_VALUES:
            return "has too many values"
        if isinstance(item, str):
            chars += len(item)
            if chars > MAX_MODEL_OUTPUT_CHARS:
                return "holds too much text"
            if unfit_text(item):
                return "holds text no store can keep"
        elif isinstance(item, dict):
            for key, inner in item.items():
                if not isinstance(key, str) or unfit_text(key):
                    return "has a key no store can keep"
                chars += len(key)
                stack.append((inner, depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((inner, depth + 1) for inner in item)
        elif item is not None and not isinstance(item, bool | int | float):
            return "is not JSON"
    return None


def unfit_text(text: str) -> bool:
    """Whether `text` holds what no store can keep: a NUL or a lone surrogate."""
    if "\x00" in text:
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
