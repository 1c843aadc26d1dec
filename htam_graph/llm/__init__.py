"""LLM backends behind one interface (base.LLMClient): Anthropic's Messages API, any
OpenAI-compatible endpoint, and scripted responses for reproducing a run.

Dependencies point one way: base (the interface and records) <- retry, prices, settings
<- api (what the HTTP backends share) <- anthropic_client, openai_client; script needs
only base; factory picks one from LLMSettings.
"""

from htam_graph.llm.base import (
    Completion,
    InvalidAnswer,
    LLMClient,
    LLMError,
    LLMUnavailable,
    Prompt,
    RequestRejected,
    Usage,
)
from htam_graph.llm.factory import make_client
from htam_graph.llm.script import ScriptWriter
from htam_graph.llm.settings import LLMSettings

__all__ = [
    "Completion",
    "InvalidAnswer",
    "LLMClient",
    "LLMError",
    "LLMSettings",
    "LLMUnavailable",
    "Prompt",
    "RequestRejected",
    "ScriptWriter",
    "Usage",
    "make_client",
]
