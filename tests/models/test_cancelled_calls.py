"""A model call cancelled mid-flight (a timeout around the turn, a client gone) leaves no note
behind: no later record in the same context can take a call that was never recorded."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from turnframe_runtime.calls import take_model_call
from turnframe_runtime.models import Ask, ModelTimeout, Transport, Usage, prompt
from turnframe_runtime.models._ports import ModelPort


class Hanging(Transport):
    """A provider that never answers."""

    provider = "hanging"

    async def ask(self, ask: Ask, noted: Callable[[Usage], None]) -> Any:
        await asyncio.Event().wait()


class TimingOut(Transport):
    provider = "timing-out"

    async def ask(self, ask: Ask, noted: Callable[[Usage], None]) -> Any:
        raise ModelTimeout("the model did not answer in time")


ASK = Ask(prompt("review"), "system", "{}", {"type": "object"}, "verdict")


async def test_a_cancelled_call_leaves_no_note_behind() -> None:
    port = ModelPort(Hanging("m", max_output_tokens=16))
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await port._call(ASK)
    assert take_model_call() is None


async def test_a_failed_call_keeps_its_note_for_the_record() -> None:
    port = ModelPort(TimingOut("m", max_output_tokens=16))
    with pytest.raises(ModelTimeout):
        await port._call(ASK)
    noted = take_model_call()
    assert noted is not None and (noted.provider, noted.model) == ("timing-out", "m")
