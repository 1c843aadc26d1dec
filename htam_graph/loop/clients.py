"""The one place that turns settings into a backend.

It lives with the loop, which assembles the backends: the LLM clients (htam_graph.llm) and
the strategy catalog (htam_graph.catalog), which itself builds on the LLM interface, so
neither of those packages has to know the other."""

from __future__ import annotations

from pathlib import Path

from htam_graph.errors import BadInput
from htam_graph.llm.base import LLMClient
from htam_graph.llm.script import ScriptClient
from htam_graph.llm.settings import LLMSettings


def make_client(settings: LLMSettings, script_path: Path | None = None) -> LLMClient:
    """The configured backend; call its `check()` before any work. `script_path` is the
    script file of the script backend (its responses are the run's LLM answers)."""
    # The provider SDKs are imported only for their backend: a script run (e.g. on a GPU
    # machine that lacks them) needs neither, and each costs import time.
    match settings.backend:
        case "anthropic":
            from htam_graph.llm.anthropic_client import AnthropicClient

            return AnthropicClient(settings)
        case "openai":
            from htam_graph.llm.openai_client import OpenAIClient

            return OpenAIClient(settings)
        case "script":
            if script_path is None:
                raise BadInput("the script backend needs a script file of responses (--script PATH)", option="--script")
            return ScriptClient(script_path)
        case "catalog":
            from htam_graph.catalog.client import CatalogClient  # torch, only for this backend

            return CatalogClient(settings.model)
