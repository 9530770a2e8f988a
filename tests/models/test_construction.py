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
    reviewer = OpenAIReviewer("llama3.1:8b", base_url="http://localhost:11434/v1")
    assert (reviewer.provider, reviewer.model_name) == ("openai-compatible", "llama3.1:8b")


def test_a_key_from_the_environment_is_used_and_never_shown(monkeypatch: Any) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-123")
    interpreter = OpenAIInterpreter("gpt-4.1-mini")
    assert "sk-secret-123" not in repr(vars(interpreter))


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
