"""The prompts model adapters send: jinja2 templates shipped in the package, each versioned by
the digest of its source, which the replay record names for every call."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import jinja2

__all__ = ["PROMPTS", "Prompt", "prompt"]

#: The templates, by name: what each port's system prompt is rendered from.
PROMPTS = ("interpret", "narrate", "review")

_ENV = jinja2.Environment(
    undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False
)


@dataclass(frozen=True)
class Prompt:
    """One prompt template: its name, source and `sha256:` digest."""

    name: str
    source: str
    digest: str

    def render(self, **values: Any) -> str:
        return _ENV.from_string(self.source).render(**values).strip()


@cache
def prompt(name: str) -> Prompt:
    """The shipped template `name` (one of `PROMPTS`)."""
    if name not in PROMPTS:
        raise KeyError(name)
    source = (resources.files(__package__) / "prompts" / f"{name}.j2").read_text("utf-8")
    return Prompt(name, source, "sha256:" + hashlib.sha256(source.encode("utf-8")).hexdigest())
