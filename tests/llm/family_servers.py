"""Local servers that answer as each model family's API does, on the wire: what they refuse
(with the error the real API returns), what their answers look like (reasoning fields,
thinking blocks, `<think>` blocks, fenced JSON, truncation when the reasoning eats the
completion limit, refusals) and their cache accounting. They write the kernels of
tests/llm/loop_harness.py, so a 3-step optimization runs end to end through the real SDKs.

The answers are modelled on recorded traffic of each family: OpenAI's o-series
(`max_completion_tokens`, `reasoning_effort`, developer messages, `reasoning_tokens` in the
usage details), DeepSeek's reasoner (`reasoning_content`, reasoning counted in
`max_tokens`, no function calling, JSON answers often fenced, `prompt_cache_hit_tokens`),
Claude with extended thinking (thinking blocks with signatures, `budget_tokens`, no forced
tool with thinking, at most 4 cache breakpoints).
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.llm.fakes import (
    FakeAnthropic,
    FakeOpenAI,
    Reply,
    anthropic_message,
    chat_completion,
    text_block,
    thinking_block,
)
from tests.llm.loop_harness import kernel_answer

NOTE = "Bounds-checked ReLU with 256-thread blocks; keep the i < n guard, an off-by-one bound writes past the end."


def user_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)


def call_kind(body: dict[str, Any]) -> str:
    """select_local (the one structured call), reflect or generate."""
    if any(k in body for k in ("tools", "response_format", "output_config")):
        return "select_local"
    if "## This step's candidate" in user_text(body):
        return "reflect"
    return "generate"


def first_offered(body: dict[str, Any]) -> str:
    offered = re.search(r"one of: ([\w.]+)", user_text(body))
    assert offered, "a strategy choice that offers no strategy"
    return offered[1]


class Writer:
    """The answers' text: the n-th generate call writes kernel n."""

    def __init__(self) -> None:
        self.written = 0

    def answer(self, kind: str, body: dict[str, Any]) -> str:
        if kind == "select_local":
            return json.dumps({"local_id": first_offered(body), "reason": "it fits the kernel's bottleneck"})
        if kind == "reflect":
            return NOTE
        self.written += 1
        return kernel_answer(self.written)


def _tokens(text: str) -> int:
    return max(len(text) // 4, 1)


class OpenAIReasoningServer(FakeOpenAI):
    """o4-mini as OpenAI serves it."""

    def __init__(self, model: str = "o4-mini") -> None:
        super().__init__({model})
        self.writer = Writer()
        self.rejected: list[str] = []

    def refuse(self, message: str, param: str) -> Reply:
        self.rejected.append(message)
        return Reply.json(
            400, {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}}
        )

    def next_reply(self) -> Reply:
        body = self.requests[-1].body
        if "max_tokens" in body:
            return self.refuse(
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
                "max_tokens",
            )
        for param in ("temperature", "top_p"):
            if param in body:
                return self.refuse(f"Unsupported parameter: '{param}' is not supported with this model.", param)
        if any(m["role"] == "system" for m in body["messages"]):
            return self.refuse("Unsupported value: 'messages[0].role' does not support 'system'.", "messages")
        if body.get("reasoning_effort") not in ("minimal", "low", "medium", "high"):
            return self.refuse("Invalid value for 'reasoning_effort'.", "reasoning_effort")
        kind = call_kind(body)
        text = self.writer.answer(kind, body)
        prompt = sum(_tokens(m["content"]) for m in body["messages"])
        cached = (prompt // 1024) * 1024 if len(self.generation_requests()) > 1 else 0
        usage = {"completion_tokens_details": {"reasoning_tokens": 900}}
        if kind == "select_local":
            return chat_completion(
                tool_calls=[(body["tools"][0]["function"]["name"], text)],
                finish_reason="tool_calls",
                model=body["model"],
                prompt_tokens=prompt,
                completion_tokens=900 + _tokens(text),
                cached_tokens=cached,
                extra_usage=usage,
            )
        return chat_completion(
            text,
            model=body["model"],
            prompt_tokens=prompt,
            completion_tokens=900 + _tokens(text),
            cached_tokens=cached,
            extra_usage=usage,
        )


class DeepSeekReasonerServer(FakeOpenAI):
    """deepseek-reasoner as DeepSeek serves it: the reasoning counts inside max_tokens (a
    call whose limit it exhausts ends with finish_reason length and no answer), no
    function calling, JSON mode only when the prompt says "json". `think_in_content`: a
    server without a reasoning parser (vLLM serving R1), the thinking inside the content."""

    def __init__(
        self, model: str = "deepseek-reasoner", reasoning_tokens: dict[str, int] | None = None, think_in_content=False
    ) -> None:
        super().__init__({model})
        self.writer = Writer()
        self.rejected: list[str] = []
        self.reasoning_tokens = {"select_local": 1500, "reflect": 700, "generate": 6000} | (reasoning_tokens or {})
        self.think_in_content = think_in_content
        self.seen_prefixes: set[str] = set()

    def refuse(self, message: str) -> Reply:
        self.rejected.append(message)
        return Reply.json(400, {"error": {"message": message, "type": "invalid_request_error", "code": None}})

    def next_reply(self) -> Reply:
        body = self.requests[-1].body
        if "tools" in body or "tool_choice" in body:
            return self.refuse("deepseek-reasoner does not support Function Calling")
        if "max_completion_tokens" in body or "reasoning_effort" in body:
            return self.refuse("Unsupported parameter: max_completion_tokens / reasoning_effort")
        if body.get("response_format") == {"type": "json_object"} and "json" not in user_text(body).lower():
            return self.refuse("Prompt must contain the word 'json' in some form to use 'response_format' json_object")
        kind = call_kind(body)
        reasoning_tokens = self.reasoning_tokens[kind]
        reasoning = f"Let me look at the kernel's bottleneck first ({reasoning_tokens} tokens of thought)."
        limit = body.get("max_tokens", 4096)
        text = self.writer.answer(kind, body)
        if kind == "select_local":
            text = f"```json\n{text}\n```"  # R1 fences JSON even in JSON mode
        # DeepSeek caches prefixes in 64-token units: the system message, then the user's head.
        system = body["messages"][0]["content"]
        hit = (_tokens(system) // 64) * 64 if system in self.seen_prefixes else 0
        self.seen_prefixes.add(system)
        prompt = sum(_tokens(m["content"]) for m in body["messages"])
        extra = {"prompt_cache_hit_tokens": hit, "prompt_cache_miss_tokens": prompt - hit}
        if reasoning_tokens + _tokens(text) > limit:  # the reasoning ate the completion limit
            self.writer.written -= kind == "generate"
            return chat_completion(
                "",
                reasoning_content=reasoning,
                finish_reason="length",
                model=body["model"],
                prompt_tokens=prompt,
                completion_tokens=limit,
                extra_usage=extra,
            )
        if self.think_in_content:
            return chat_completion(
                f"<think>\n{reasoning}\n</think>\n\n{text}",
                model=body["model"],
                prompt_tokens=prompt,
                completion_tokens=reasoning_tokens + _tokens(text),
                extra_usage=extra,
            )
        return chat_completion(
            text,
            reasoning_content=reasoning,
            model=body["model"],
            prompt_tokens=prompt,
            completion_tokens=reasoning_tokens + _tokens(text),
            extra_usage=extra,
        )


class AnthropicThinkingServer(FakeAnthropic):
    """Claude with extended thinking as the Messages API serves it."""

    def __init__(self, model: str = "claude-sonnet-5-5") -> None:
        super().__init__({model})
        self.writer = Writer()
        self.rejected: list[str] = []
        self.cached: set[str] = set()

    def refuse(self, message: str) -> Reply:
        self.rejected.append(message)
        return self.error(400, message)

    def next_reply(self) -> Reply:
        body = self.requests[-1].body
        thinking = body.get("thinking")
        if not thinking or thinking.get("type") != "enabled":
            return self.refuse("this test's model thinks: thinking must be enabled")
        budget = thinking.get("budget_tokens", 0)
        if budget < 1024:
            return self.refuse("thinking.budget_tokens: Input should be greater than or equal to 1024")
        if body["max_tokens"] <= budget:
            return self.refuse("`max_tokens` must be greater than `thinking.budget_tokens`")
        if (body.get("tool_choice") or {}).get("type") in ("tool", "any"):
            return self.refuse("Thinking may not be enabled when tool_choice forces tool use.")
        if "temperature" in body and body["temperature"] != 1:
            return self.refuse("`temperature` may only be set to 1 when thinking is enabled.")
        blocks = [*body.get("system", [])]
        for message in body["messages"]:
            if isinstance(message["content"], list):
                blocks.extend(message["content"])
        marked = [b for b in blocks if "cache_control" in b]
        if len(marked) > 4:
            return self.refuse("A maximum of 4 blocks with cache_control may be provided. Found 5.")
        # Cache accounting as Anthropic does it: the longest marked prefix seen before is read.
        prefix, read, written = "", 0, 0
        for block in blocks:
            prefix += block["text"]
            if "cache_control" in block:
                if prefix in self.cached:
                    read = _tokens(prefix)
                else:
                    self.cached.add(prefix)
                    written = _tokens(prefix) - read
        total = sum(_tokens(b["text"]) for b in blocks)
        kind = call_kind(body)
        text = self.writer.answer(kind, body)
        return anthropic_message(
            thinking_block(f"The {kind} call: think about the kernel first."),
            text_block(text),
            model=body["model"],
            input_tokens=max(total - read - written, 1),
            output_tokens=400 + _tokens(text),
            cache_read=read,
            cache_write=written,
        )
