"""Settings of the LLM layer. They nest into htam_graph.config.Settings as `llm`, so each
field comes from a flag, HTAM_LLM__<FIELD> in the environment, or the settings file (config.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

Backend = Literal["anthropic", "openai", "script", "catalog"]
StructuredMode = Literal["tool", "json"]
# How a model family is asked (llm/family.py): which parameters, which structured mode.
Family = Literal["chat", "openai-reasoning", "deepseek-reasoner", "anthropic", "anthropic-thinking"]
ReasoningEffort = Literal["minimal", "low", "medium", "high"]

# The SDKs' own variables, read when HTAM_LLM__API_KEY is not set.
API_KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
DEFAULT_ANTHROPIC_MODEL = "claude-opus-5-5"


class RetryPolicy(BaseModel):
    """How transient failures are retried (llm/retry.py does the waiting)."""

    model_config = ConfigDict(frozen=True)

    max_retries: int = Field(4, ge=0)
    backoff_s: float = Field(1.0, ge=0.0)  # the first wait; doubled per retry
    backoff_max_s: float = Field(60.0, ge=0.0)


class LLMSettings(BaseModel):
    """Which LLM answers and how it is called. Defaults suit a long, code-writing call."""

    backend: Backend = Field("anthropic", description="anthropic, openai (any OpenAI-compatible endpoint), script")
    model: str | None = Field(
        None,
        description=f"model id; default {DEFAULT_ANTHROPIC_MODEL} for anthropic, required for openai, catalog-space-v1 "
        "for catalog (runs start from the task's base kernel; catalog-v1: the tuned start)",
    )
    base_url: str | None = Field(
        None,
        description="endpoint, e.g. https://api.deepseek.com or http://127.0.0.1:8000/v1 for vLLM; "
        "default: the SDK's (its ANTHROPIC_BASE_URL / OPENAI_BASE_URL, then the provider's)",
    )
    api_key: SecretStr | None = Field(None, description="default: ANTHROPIC_API_KEY or OPENAI_API_KEY")
    family: Family | None = Field(
        None,
        description="the model family, which decides the request's parameters (llm/family.py, docs/prompts.md): "
        "chat, openai-reasoning (o1/o3/o4/gpt-5: max_completion_tokens, reasoning_effort), deepseek-reasoner "
        "(R1-style: reasoning counted in max_tokens, no forced tool calls), anthropic, anthropic-thinking "
        "(extended thinking with budget_tokens). Default: detected from the backend and the model's name",
    )
    max_tokens: int = Field(
        16384, ge=1, description="max answer tokens of a call that names none (a reasoning budget comes on top)"
    )
    reasoning_budget: int = Field(
        16000,
        ge=1024,
        description="tokens a reasoning model may think per call, on top of the call's answer limit "
        "(openai-reasoning and deepseek-reasoner: added to the completion limit; anthropic-thinking: budget_tokens)",
    )
    reasoning_effort: ReasoningEffort = Field("medium", description="openai-reasoning's reasoning_effort")
    timeout_s: float = Field(600.0, gt=0.0, description="per HTTP request (connecting: 5 s)")
    max_retries: int = Field(4, ge=0, description="retries of transient failures (429, 5xx, 529, connection)")
    retry_backoff_s: float = Field(1.0, ge=0.0, description="first backoff, doubled per retry, unless retry-after")
    retry_backoff_max_s: float = Field(60.0, ge=0.0)
    structured_mode: StructuredMode | None = Field(
        None,
        description="how structured answers are asked for: tool (a forced tool call) or json (anthropic: "
        "output_config.format with the JSON schema; openai: response_format json_object). Default: json for "
        "anthropic (current Claude models reject a forced tool choice), tool for openai",
    )
    prices: Path | None = Field(None, description="YAML/JSON price file adding to or replacing the shipped prices")

    def api_key_value(self) -> str | None:
        """The key to send: the setting, else the SDK's own environment variable."""
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        env = API_KEY_ENV.get(self.backend)
        return os.environ.get(env) if env else None

    @property
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_retries=self.max_retries, backoff_s=self.retry_backoff_s, backoff_max_s=self.retry_backoff_max_s
        )
