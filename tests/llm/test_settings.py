"""LLMSettings as the lead nests it into Settings (`llm`), read from HTAM_LLM__* variables."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from htam_graph.llm.retry import retry_after_s
from htam_graph.llm.settings import LLMSettings, RetryPolicy


class NestedSettings(BaseSettings):
    """htam_graph.config.Settings' configuration, with only the `llm` field."""

    model_config = SettingsConfigDict(env_prefix="HTAM_", env_nested_delimiter="__", extra="ignore")

    llm: LLMSettings = Field(default_factory=LLMSettings)


def test_defaults() -> None:
    s = LLMSettings()
    assert (s.backend, s.model, s.base_url, s.api_key, s.structured_mode) == ("anthropic", None, None, None, None)
    assert (s.max_tokens, s.timeout_s, s.max_retries) == (16384, 600.0, 4)
    assert s.retry_policy == RetryPolicy(max_retries=4, backoff_s=1.0, backoff_max_s=60.0)


def test_fields_come_from_htam_llm_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "HTAM_LLM__BACKEND": "openai",
        "HTAM_LLM__MODEL": "deepseek-reasoner",
        "HTAM_LLM__BASE_URL": "https://api.deepseek.com",
        "HTAM_LLM__API_KEY": "sk-secret",
        "HTAM_LLM__MAX_TOKENS": "8000",
        "HTAM_LLM__TIMEOUT_S": "120",
        "HTAM_LLM__MAX_RETRIES": "2",
        "HTAM_LLM__RETRY_BACKOFF_S": "0.5",
        "HTAM_LLM__RETRY_BACKOFF_MAX_S": "10",
        "HTAM_LLM__STRUCTURED_MODE": "json",
        "HTAM_LLM__PRICES": "/etc/prices.yaml",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    s = NestedSettings().llm
    assert (s.backend, s.model, s.base_url, s.max_tokens, s.timeout_s) == (
        "openai",
        "deepseek-reasoner",
        "https://api.deepseek.com",
        8000,
        120.0,
    )
    assert s.retry_policy == RetryPolicy(max_retries=2, backoff_s=0.5, backoff_max_s=10.0)
    assert (s.structured_mode, s.prices) == ("json", Path("/etc/prices.yaml"))
    assert s.api_key_value() == "sk-secret" and "sk-secret" not in repr(s)


def test_the_key_falls_back_to_the_sdk_variable_of_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "a-key")
    monkeypatch.setenv("OPENAI_API_KEY", "o-key")
    assert LLMSettings(backend="anthropic").api_key_value() == "a-key"
    assert LLMSettings(backend="openai").api_key_value() == "o-key"
    assert LLMSettings(backend="script").api_key_value() is None


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "x", "retry-after": "3"}, 3.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # a date in the past: no wait
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_headers(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after_s(headers) == seconds
