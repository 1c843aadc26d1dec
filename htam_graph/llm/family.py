"""Model families: what a request must look like for the model that receives it.

Reasoning models do not take the parameters a chat model takes (issue 34, item 2). The
families, detected from the model's name (docs/prompts.md has the table):

- `chat`: any other OpenAI-compatible model (gpt-4o, deepseek-chat, vLLM's Llama):
  `max_tokens` = the answer's limit; structured answers by a forced tool call.
- `openai-reasoning`: o1, o3, o4-mini, gpt-5 (an `openai/` prefix is ignored):
  `max_completion_tokens` = answer + reasoning budget, `reasoning_effort`, the
  instructions as a developer message; a forced tool call.
- `deepseek-reasoner`: deepseek-reasoner, DeepSeek-R1 and its distills, QwQ: `max_tokens`
  = answer + reasoning budget (the reasoning counts inside it); reasoning comes back as
  `reasoning_content` or a `<think>` block; JSON mode (it takes no forced tool call).
- `anthropic`: the anthropic backend: `max_tokens` = the answer's limit; JSON output
  (`output_config.format`) or a forced tool.
- `anthropic-thinking`: by setting only: `thinking: {type: enabled, budget_tokens}` and
  `max_tokens` = answer + budget; JSON output (a forced tool is refused with thinking).

The loop names an *answer* limit per call (a strategy choice, a note, a kernel); the family
adds the reasoning budget, so the thinking has room of its own beyond the answer's. A model
that thinks past it is cut off, which the backends detect (`Completion.truncated`) and the
loop counts as an event. Names are only a guess (`gpt-5-chat` is no reasoning model, a
served R1 may be called anything): `HTAM_LLM__FAMILY` overrides the detection.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from htam_graph.errors import ConfigError
from htam_graph.llm.settings import Family, LLMSettings, StructuredMode

_OPENAI_REASONING = re.compile(r"^(o\d+(-mini|-pro|-preview)?|gpt-5)([-.].*)?$")
_DEEPSEEK_REASONER = re.compile(r"(deepseek-reasoner|deepseek-r1|(^|[-_])r1([-_]|$)|qwq)")
_BACKEND_FAMILIES: dict[str, tuple[Family, ...]] = {
    "openai": ("chat", "openai-reasoning", "deepseek-reasoner"),
    "anthropic": ("anthropic", "anthropic-thinking"),
}


def detect_family(backend: str, model: str) -> Family:
    """The family of `model` on `backend`, from its name."""
    if backend == "anthropic":
        return "anthropic"  # extended thinking is opt-in: HTAM_LLM__FAMILY=anthropic-thinking
    name = model.lower().rsplit("/", 1)[-1]
    if _OPENAI_REASONING.match(name):
        return "openai-reasoning"
    if _DEEPSEEK_REASONER.search(name):
        return "deepseek-reasoner"
    return "chat"


@dataclass(frozen=True)
class RequestPlan:
    """How one backend asks its model, decided once per client."""

    family: Family
    reasoning: bool  # the model thinks before it answers: its budget comes on top of the answer
    reasoning_budget: int
    structured_mode: StructuredMode

    def completion_limit(self, answer_tokens: int) -> int:
        """The completion limit to send for an answer of up to `answer_tokens`."""
        return answer_tokens + self.reasoning_budget if self.reasoning else answer_tokens


def plan_requests(settings: LLMSettings, model: str) -> RequestPlan:
    """The family (the setting, else detected) and what follows from it; ConfigError for a
    family of the other backend or a structured mode the family cannot use."""
    backend = settings.backend
    family = settings.family or detect_family(backend, model)
    allowed = _BACKEND_FAMILIES.get(backend, ())
    if family not in allowed:
        raise ConfigError(
            f"HTAM_LLM__FAMILY={family} is not a family of the {backend} backend (one of: {', '.join(allowed)})",
            setting="HTAM_LLM__FAMILY",
            value=family,
        )
    forced_tool_ok = family in ("chat", "openai-reasoning", "anthropic")
    json_default = ("deepseek-reasoner", "anthropic", "anthropic-thinking")
    default_mode: StructuredMode = "json" if family in json_default else "tool"
    mode = settings.structured_mode or default_mode
    if mode == "tool" and not forced_tool_ok:
        raise ConfigError(
            f"model {model} ({family}) does not accept a forced tool call: leave HTAM_LLM__STRUCTURED_MODE unset "
            "or set it to json",
            setting="HTAM_LLM__STRUCTURED_MODE",
            value=mode,
        )
    return RequestPlan(
        family=family,
        reasoning=family in ("openai-reasoning", "deepseek-reasoner", "anthropic-thinking"),
        reasoning_budget=settings.reasoning_budget,
        structured_mode=mode,
    )
