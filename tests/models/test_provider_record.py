"""A model call's record names its prompt digest and tokens; a record written before those
fields existed serializes, and digests, exactly as it did."""

from __future__ import annotations

from turnframe_core.canonical import digest
from turnframe_core.replay import ProviderAttempt
from turnframe_runtime.calls import ModelCall, note_model_call
from turnframe_runtime.context import Purpose, provider_attempt

OLD = {
    "attempt": 1,
    "purpose": "understand",
    "provider": "ScriptedInterpreter",
    "model": "scripted",
    "outcome": "succeeded",
    "code": None,
    "request_id": None,
    "latency_ms": 12,
}


def test_a_record_without_the_new_fields_digests_as_before() -> None:
    attempt = ProviderAttempt.model_validate(OLD)
    assert attempt.model_dump(mode="json") == OLD
    assert digest(attempt) == digest(OLD)


def test_a_record_with_the_new_fields_keeps_them() -> None:
    attempt = ProviderAttempt.model_validate(
        {**OLD, "prompt_digest": "sha256:" + "0" * 64, "input_tokens": 10, "output_tokens": 0}
    )
    dumped = attempt.model_dump(mode="json")
    assert (dumped["prompt_digest"], dumped["input_tokens"], dumped["output_tokens"]) == (
        "sha256:" + "0" * 64,
        10,
        0,
    )
    assert ProviderAttempt.model_validate(dumped) == attempt


def test_a_noted_call_is_taken_once_by_the_record_of_that_call() -> None:
    class Port:
        model_name = "port-model"

    note_model_call(ModelCall("openai", "gpt-4.1-mini", "sha256:" + "1" * 64, 5, 7, "req_1"))
    first = provider_attempt(Purpose.UNDERSTAND, Port(), 0, 3)
    second = provider_attempt(Purpose.UNDERSTAND, Port(), 0, 3)
    assert (first.provider, first.model, first.input_tokens, first.output_tokens) == (
        "openai",
        "gpt-4.1-mini",
        5,
        7,
    )
    assert first.request_id == "req_1"
    assert (second.provider, second.model, second.prompt_digest) == ("Port", "port-model", None)
