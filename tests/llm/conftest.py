"""Fake provider servers and settings whose retries wait milliseconds, not seconds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from htam_graph.llm.settings import LLMSettings
from tests.llm.fakes import API_KEY, FakeAnthropic, FakeOpenAI

ANTHROPIC_MODEL = "claude-sonnet-5-5"  # priced by the shipped table
OPENAI_MODEL = "deepseek-reasoner"


@pytest.fixture(autouse=True)
def _no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDKs read these; a developer's own keys or endpoints must not leak into tests."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def anthropic_server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic({ANTHROPIC_MODEL, "claude-fable-5-2"}) as server:
        yield server


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI({OPENAI_MODEL, "other-model"}) as server:
        yield server


def settings(backend: str, base_url: str, **overrides: object) -> LLMSettings:
    values: dict[str, object] = {
        "backend": backend,
        "model": ANTHROPIC_MODEL if backend == "anthropic" else OPENAI_MODEL,
        "base_url": base_url,
        "api_key": API_KEY,
        "max_retries": 3,
        "retry_backoff_s": 0.001,
        "retry_backoff_max_s": 0.01,
        "timeout_s": 10.0,
        # the protocol tests ask as a plain chat model; test_families.py covers each family's requests
        **({"family": "chat"} if backend == "openai" else {}),
    }
    return LLMSettings.model_validate(values | overrides)
