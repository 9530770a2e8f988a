"""The three ports as model adapters: what each asks a model and how it reads the answer. A
provider module supplies only the call (`_ask`): how a prompt and a schema travel to its API,
and how its failures map to the typed ones."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from turnframe_core.understanding import Brief, Understanding
from turnframe_runtime.calls import ModelCall, note_model_call, take_model_call
from turnframe_runtime.models._prompts import Prompt, prompt
from turnframe_runtime.models._schema import (
    draft_schema,
    read_draft,
    read_understanding,
    read_verdict,
    request_json,
    review_schema,
    understanding_schema,
)
from turnframe_runtime.ports import AnswerRequest, ReviewRequest, ReviewVerdict, TransitionRequest

__all__ = [
    "Ask",
    "InterpreterAdapter",
    "ModelPort",
    "NarratorAdapter",
    "ReviewerAdapter",
    "Transport",
    "Usage",
]

#: How many tokens a model may answer with unless the adapter is told otherwise.
DEFAULT_MAX_OUTPUT_TOKENS = 2048


@dataclass(frozen=True)
class Ask:
    """One call: the system prompt, the request's JSON, the schema its answer must fit and the
    name the schema goes by (a tool's name, for providers that constrain output by tools)."""

    prompt: Prompt
    system: str
    user: str
    schema: dict[str, Any]
    name: str


@dataclass(frozen=True)
class Usage:
    """What the provider said of a call: its tokens and its request id."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    request_id: str | None = None


def whole(value: Any) -> int | None:
    """A provider's token count when it is a whole number, else None (unknown)."""
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return value if ok else None


def text_or_none(value: Any) -> str | None:
    """A provider's id when it is text, else None."""
    return value if isinstance(value, str) and value else None


class Transport(ABC):
    """How one provider's API carries an `Ask` and maps its failures to the typed ones."""

    #: the provider's name as the replay record gives it
    provider: str = "unspecified"

    def __init__(self, model: str, *, max_output_tokens: int) -> None:
        if not model:
            raise ValueError("a model adapter names its model")
        self.model_name = model
        self.max_output_tokens = max_output_tokens

    @abstractmethod
    async def ask(self, ask: Ask, noted: Callable[[Usage], None]) -> Any:
        """Send `ask`, tell `noted` what the provider counted as soon as it answers, and
        return the answer's JSON; raise a `ModelFailure` (or `MalformedModelOutput`) when
        there is none to read."""


class ModelPort:
    """A port backed by one model of one provider (its `Transport`)."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.model_name = transport.model_name

    @property
    def provider(self) -> str:
        return self.transport.provider

    async def _call(self, ask: Ask) -> Any:
        """The model's answer to `ask` as JSON; the call is noted for the replay record
        whether it answers or raises. A call cancelled mid-flight is never recorded, so its
        note is dropped rather than left for a later record to take."""
        self._note(ask, Usage())
        try:
            return await self.transport.ask(ask, lambda usage: self._note(ask, usage))
        except Exception:
            raise
        except BaseException:
            take_model_call()
            raise

    def _note(self, ask: Ask, usage: Usage) -> None:
        note_model_call(
            ModelCall(
                provider=self.transport.provider,
                model=self.model_name,
                prompt_digest=ask.prompt.digest,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                request_id=usage.request_id,
            )
        )


class InterpreterAdapter(ModelPort):
    """An `Interpreter`: the brief as the request, its understandings as the schema."""

    async def understand(self, brief: Brief) -> Understanding:
        template = prompt("interpret")
        ask = Ask(
            template,
            template.render(locale=brief.locale),
            request_json(brief),
            understanding_schema(brief),
            "understanding",
        )
        return read_understanding(await self._call(ask))


class NarratorAdapter(ModelPort):
    """A `Narrator`: structured narration (moves) by default, free narration when built with
    `narration="free"` (which the runtime pairs with a `ClaimReviewer`)."""

    def __init__(
        self, transport: Transport, *, narration: Literal["structured", "free"] = "structured"
    ) -> None:
        super().__init__(transport)
        if narration not in ("structured", "free"):
            raise ValueError("narration is 'structured' or 'free'")
        self.narration = narration

    async def transition(self, request: TransitionRequest) -> Mapping[str, Any] | str:
        return await self._draft(request, "transition")

    async def answer(self, request: AnswerRequest) -> Mapping[str, Any] | str:
        return await self._draft(request, "answer")

    async def _draft(
        self, request: TransitionRequest | AnswerRequest, kind: str
    ) -> Mapping[str, Any] | str:
        structured = self.narration == "structured"
        template = prompt("narrate")
        system = template.render(
            locale=request.locale, structured=structured, kind=kind, findings=request.findings
        )
        schema = draft_schema(request, structured=structured)
        data = await self._call(Ask(template, system, request_json(request), schema, kind))
        return read_draft(data, request, structured=structured)


class ReviewerAdapter(ModelPort):
    """A `ClaimReviewer`: the block and what the turn lets it state, a verdict back."""

    async def review(self, request: ReviewRequest) -> ReviewVerdict:
        template = prompt("review")
        ask = Ask(
            template,
            template.render(locale=request.locale),
            request_json(request),
            review_schema(),
            "verdict",
        )
        return read_verdict(await self._call(ask))
