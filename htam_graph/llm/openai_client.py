"""Any OpenAI-compatible chat-completions endpoint through the official SDK: DeepSeek-R1
(as in the HTAM paper), vLLM, OpenAI itself, others, chosen by base URL.

The system text and the static prefix form the system message, first in every call, so
providers that cache prompt prefixes automatically (OpenAI, DeepSeek, vLLM's prefix
cache) reuse it. Reasoning models return their thinking apart from the answer:
`reasoning_content` on the message (DeepSeek, vLLM; newer vLLM says `reasoning`), or a
`<think>...</think>` block at the head of the content when the server does not split it;
either way it lands in `Completion.reasoning`, never in the answer. Structured answers come
from a forced function call (`tool`) or JSON mode (`json`, for servers without tool
calls: the schema is then appended to the user message, as JSON mode does not carry one).

The request's parameters follow the model's family (llm/family.py): a chat model gets
`max_tokens`; an OpenAI reasoning model `max_completion_tokens` (answer plus reasoning
budget), `reasoning_effort` and a developer message; an R1-style reasoner `max_tokens` with
the reasoning budget added (its reasoning counts inside it) and JSON mode, since it takes no
forced tool call. The step's shared part and the call's question form the user message,
shared part first, so automatic prefix caching covers everything up to the question.
"""

from __future__ import annotations

import inspect
import json
import logging
import re
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

from htam_graph.errors import ConfigError
from htam_graph.llm.api import CONNECT_TIMEOUT_S, ApiClient, MalformedResponse, connection_failure, malformed_failure
from htam_graph.llm.base import Completion, InvalidAnswer, Prompt, T, Usage, parse_answer
from htam_graph.llm.family import plan_requests
from htam_graph.llm.retry import TRANSIENT_STATUS, Failure, retry_after_s
from htam_graph.llm.settings import LLMSettings

logger = logging.getLogger(__name__)

_TRUNCATED = frozenset({"length"})
_THINK = re.compile(r"^\s*<think>(?P<reasoning>.*?)</think>\s*", re.DOTALL)
# R1-style chat templates open the think block in the prompt, so a server that does not
# split reasoning returns only its end: "...reasoning...</think>answer".
_THINK_TAIL = re.compile(r"^(?P<reasoning>.*?)</think>\s*", re.DOTALL)
# Quota errors come as 429 too, but waiting does not refill an account.
_QUOTA_CODES = frozenset({"insufficient_quota"})


class OpenAIClient(ApiClient):
    name = "openai"

    def __init__(self, settings: LLMSettings) -> None:
        if not settings.model:
            raise ConfigError(
                "the openai backend needs a model: set HTAM_LLM__MODEL (e.g. deepseek-reasoner)",
                setting="HTAM_LLM__MODEL",
            )
        super().__init__(settings, settings.model)
        self.plan = plan_requests(settings, settings.model)
        self.structured_mode = self.plan.structured_mode
        self._sdk = openai.OpenAI(
            api_key=self._api_key,
            base_url=settings.base_url,
            timeout=openai.Timeout(settings.timeout_s, connect=CONNECT_TIMEOUT_S),
            max_retries=0,
        )

    @property
    def base_url(self) -> str:
        return str(self._sdk.base_url)

    def close(self) -> None:
        self._sdk.close()

    def _check_model(self) -> None:
        """GET /models and look for the model: every compatible server lists its models, but
        not all (vLLM) answer GET /models/{id}."""
        served = self._call("model list", lambda: [m.id for m in self._sdk.models.list()], retry=False)
        if self.model not in served:
            raise ConfigError(
                f"{self.name} at {self.base_url} has no model {self.model!r} (it serves: "
                f"{', '.join(sorted(served)) or 'none'}); set HTAM_LLM__MODEL (or HTAM_LLM__BASE_URL)",
                setting="HTAM_LLM__MODEL",
                value=self.model,
            )

    def complete(self, prompt: Prompt, max_tokens: int | None = None) -> Completion:
        response = self._send(prompt, prompt.user, max_tokens)
        return self._completion(response, response.choices[0].message.content or "")

    def _refused(self, response: ChatCompletion, completion: Completion) -> None:
        refusal = response.choices[0].message.refusal
        if refusal:
            raise InvalidAnswer(f"the model refused: {refusal}", completion)

    def structured(self, prompt: Prompt, schema: type[T], max_tokens: int | None = None) -> tuple[T, Completion]:
        if self.structured_mode == "json":
            user = (
                f"{prompt.user.rstrip()}\n\nAnswer with one JSON object that matches this JSON schema:\n"
                f"{json.dumps(schema.model_json_schema())}\n"
            )
            response = self._send(prompt, user, max_tokens, response_format={"type": "json_object"})
            completion = self._completion(response, response.choices[0].message.content or "")
            self._refused(response, completion)
            return parse_answer(schema, completion), completion

        function: Any = {
            "type": "function",
            "function": {
                "name": schema.__name__,
                "description": inspect.cleandoc(schema.__doc__ or f"Give the answer as a {schema.__name__}."),
                "parameters": schema.model_json_schema(),
            },
        }
        choice: Any = {"type": "function", "function": {"name": schema.__name__}}
        response = self._send(prompt, prompt.user, max_tokens, tools=[function], tool_choice=choice)
        message = response.choices[0].message
        calls = [c for c in message.tool_calls or () if c.type == "function" and c.function.name == schema.__name__]
        # No call: the content is what the model said instead; parsing it names the problem.
        completion = self._completion(response, calls[0].function.arguments if calls else message.content or "")
        self._refused(response, completion)
        return parse_answer(schema, completion), completion

    def _send(self, prompt: Prompt, user: str, max_tokens: int | None, **options: Any) -> ChatCompletion:
        system = "\n\n".join(part for part in (prompt.system, prompt.static) if part)
        messages: list[ChatCompletionMessageParam] = []
        if system:  # OpenAI's reasoning models take the instructions as a developer message
            if self.plan.family == "openai-reasoning":
                messages.append({"role": "developer", "content": system})
            else:
                messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": f"{prompt.shared}\n\n{user}" if prompt.shared else user})
        limit = self.plan.completion_limit(max_tokens or self.settings.max_tokens)
        if self.plan.family == "openai-reasoning":
            options |= {"max_completion_tokens": limit, "reasoning_effort": self.settings.reasoning_effort}
        else:
            options |= {"max_tokens": limit}

        def send() -> ChatCompletion:
            response = self._sdk.chat.completions.create(model=self.model, messages=messages, **options)
            if not response.choices or response.choices[0].message is None:
                raise MalformedResponse("a chat completion without a choice")
            return response

        return self._call("chat completions", send)

    def _completion(self, response: ChatCompletion, text: str) -> Completion:
        choice = response.choices[0]
        extra = choice.message.model_extra or {}
        text, reasoning = _split_reasoning(text, extra.get("reasoning_content") or extra.get("reasoning") or None)
        return Completion(
            text=text,
            reasoning=reasoning,
            usage=self._usage(**tokens) if (tokens := _tokens(response)) else Usage(cost_usd=None),
            model=response.model or self.model,
            stop_reason="refusal" if choice.message.refusal else choice.finish_reason,
            truncated=choice.finish_reason in _TRUNCATED,
            request_id=response._request_id,
        )

    def _classify(self, e: BaseException) -> Failure | None:
        if isinstance(e, openai.APIStatusError):
            body = e.body if isinstance(e.body, dict) else {}
            quota = e.status_code == 429 and (body.get("code") in _QUOTA_CODES or body.get("type") in _QUOTA_CODES)
            return Failure(
                status=e.status_code,
                message=str(body.get("message") or e.message),
                transient=e.status_code in TRANSIENT_STATUS and not quota,
                retry_after_s=retry_after_s(e.response.headers),
            )
        if isinstance(e, openai.APIConnectionError):
            return connection_failure(e)
        if isinstance(e, MalformedResponse | json.JSONDecodeError | openai.APIResponseValidationError):
            return malformed_failure(e)
        return None


def _split_reasoning(text: str, reasoning: str | None) -> tuple[str, str | None]:
    """The answer without a leading think block, and the reasoning with it."""
    think = _THINK.match(text) or (_THINK_TAIL.match(text) if reasoning is None else None)
    if think is None:
        return text, reasoning
    return text[think.end() :], "\n\n".join(r for r in (reasoning, think["reasoning"].strip()) if r) or None


def _tokens(response: ChatCompletion) -> dict[str, int] | None:
    """OpenAI counts cached tokens inside prompt_tokens; split them out to match Usage.
    DeepSeek reports its cache hits as prompt_cache_hit_tokens instead. None when the
    server sent no usage: the call then has unknown tokens and cost, and does not fail."""
    usage = response.usage
    if usage is None:
        logger.warning("%s sent no token usage for request %s", response.model, response._request_id)
        return None
    details = usage.prompt_tokens_details
    cached = (details.cached_tokens if details else None) or (usage.model_extra or {}).get("prompt_cache_hit_tokens")
    written = (details.cache_write_tokens if details else None) or 0
    cached = int(cached or 0)
    return {
        "input_tokens": max(usage.prompt_tokens - cached - written, 0),
        "output_tokens": usage.completion_tokens,
        "cache_read_tokens": cached,
        "cache_write_tokens": written,
    }
