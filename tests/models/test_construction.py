"""An adapter that cannot work says so when it is built: a missing API key or SDK extra is a
typed error with a stable code, naming what to set or install and never a secret."""

from __future__ import annotations

import builtins
import subprocess
import sys
from typing import Any

import pytest

from turnframe_core import codes
from turnframe_runtime.models import (
    AnthropicNarrator,
    MissingApiKey,
    MissingModelExtra,
    OpenAIInterpreter,
    OpenAIReviewer,
)
from turnframe_runtime.models._ports import ModelPort

COMPATIBLE_KEY = "TURNFRAME_OPENAI_COMPATIBLE_API_KEY"
OPENAI_API = "https://api.openai.com/v1"


def _base_url(port: ModelPort) -> str:
    """Where the port's SDK client sends its calls."""
    return str(port.transport.client.base_url).rstrip("/")  # type: ignore[attr-defined]


def test_an_openai_adapter_without_a_key_refuses_to_be_built(monkeypatch: Any) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingApiKey) as refused:
        OpenAIInterpreter("gpt-4.1-mini")
    assert refused.value.code == codes.MODEL_MISSING_API_KEY
    assert "OPENAI_API_KEY" in str(refused.value)


def test_an_anthropic_adapter_without_a_key_refuses_to_be_built(monkeypatch: Any) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(MissingApiKey, match="ANTHROPIC_API_KEY"):
        AnthropicNarrator("claude-sonnet-4-5")


def test_a_local_openai_compatible_server_needs_no_key(monkeypatch: Any) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv(COMPATIBLE_KEY, raising=False)
    reviewer = OpenAIReviewer("llama3.1:8b", base_url="http://localhost:11434/v1")
    assert (reviewer.provider, reviewer.model_name) == ("openai-compatible", "llama3.1:8b")
    assert _base_url(reviewer) == "http://localhost:11434/v1"


def test_a_server_by_base_url_is_never_sent_the_openai_key(monkeypatch: Any) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key")
    monkeypatch.delenv(COMPATIBLE_KEY, raising=False)
    interpreter = OpenAIInterpreter("llama3.1:8b", base_url="https://llm.example.net/v1")
    assert interpreter.transport.client.api_key != "sk-real-openai-key"  # type: ignore[attr-defined]
    assert _base_url(interpreter) == "https://llm.example.net/v1"


def test_a_server_by_base_url_takes_its_key_from_its_own_variable(monkeypatch: Any) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key")
    monkeypatch.setenv(COMPATIBLE_KEY, "sk-compatible")
    interpreter = OpenAIInterpreter("llama3.1:8b", base_url="https://llm.example.net/v1")
    assert interpreter.transport.client.api_key == "sk-compatible"  # type: ignore[attr-defined]


def test_an_explicit_key_is_sent_to_the_server_by_base_url(monkeypatch: Any) -> None:
    monkeypatch.setenv(COMPATIBLE_KEY, "sk-compatible")
    interpreter = OpenAIInterpreter(
        "llama3.1:8b", base_url="https://llm.example.net/v1", api_key="sk-given"
    )
    assert interpreter.transport.client.api_key == "sk-given"  # type: ignore[attr-defined]


def test_openai_is_reached_at_openai_whatever_openai_base_url_says(monkeypatch: Any) -> None:
    """The record says "openai", so the call goes there: OPENAI_BASE_URL is not followed."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://elsewhere.example.net/v1")
    interpreter = OpenAIInterpreter("gpt-4.1-mini")
    assert (interpreter.provider, _base_url(interpreter)) == ("openai", OPENAI_API)


@pytest.mark.parametrize(
    ("adapter", "extra"), [(OpenAIInterpreter, "openai"), (AnthropicNarrator, "anthropic")]
)
def test_an_adapter_without_its_extra_names_the_extra_to_install(
    monkeypatch: Any, adapter: Any, extra: str
) -> None:
    real_import = builtins.__import__

    def no_sdk(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == extra or name.startswith(f"{extra}."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr("importlib.import_module", lambda name: no_sdk(name))
    with pytest.raises(MissingModelExtra) as refused:
        adapter("some-model", api_key="k")
    assert refused.value.code == codes.MODEL_MISSING_EXTRA
    assert f"turnframe[{extra}]" in str(refused.value)


def test_importing_the_runtime_loads_no_model_sdk() -> None:
    """The adapters are exported from the runtime's top; their SDKs load only when one is built,
    so a runtime without the extras imports as before."""
    code = (
        "import sys, turnframe_runtime\n"
        "assert 'openai' not in sys.modules and 'anthropic' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
