"""Claude through the Messages API and the official SDK.

The system text and the static prefix go as system content blocks marked
`cache_control: ephemeral`, so calls after the first read them from the prompt cache
(about a tenth of the input price) instead of paying for them again. Structured answers
are asked for with `output_config.format` (the answer is constrained to the JSON schema)
or, in `tool` mode, with one tool whose input schema is the answer's and a tool choice
forcing it; current models (Opus 5.5, Sonnet 5.5, Fable 5.1) reject a forced tool choice
with a 400, hence `json` is the default. Either way pydantic validates the answer.

With extended thinking (family `anthropic-thinking`, llm/family.py) every request carries
`thinking: {type: enabled, budget_tokens}` and a `max_tokens` of the answer's limit plus
that budget; thinking blocks come back apart from the text and land in
`Completion.reasoning`. The step's shared part is the first block of the user message,
marked cacheable too: a step's calls then read the system, the static prefix and the
step's state from the cache (three of the four breakpoints Anthropic allows).
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import anthropic
from anthropic.types import Message, MessageParam, TextBlockParam

from htam_graph.llm.api import CONNECT_TIMEOUT_S, ApiClient, MalformedResponse, connection_failure, malformed_failure
from htam_graph.llm.base import Completion, InvalidAnswer, Prompt, T, parse_answer, validate_answer
from htam_graph.llm.family import plan_requests
from htam_graph.llm.retry import TRANSIENT_STATUS, Failure, retry_after_s
from htam_graph.llm.settings import DEFAULT_ANTHROPIC_MODEL, LLMSettings

_EPHEMERAL: Any = {"type": "ephemeral"}
_TRUNCATED = frozenset({"max_tokens", "model_context_window_exceeded"})


class AnthropicClient(ApiClient):
    name = "anthropic"

    def __init__(self, settings: LLMSettings) -> None:
        super().__init__(settings, settings.model or DEFAULT_ANTHROPIC_MODEL)
        self.plan = plan_requests(settings, self.model)
        self.structured_mode = self.plan.structured_mode
        self._sdk = anthropic.Anthropic(
            api_key=self._api_key,
            base_url=settings.base_url,
            timeout=anthropic.Timeout(settings.timeout_s, connect=CONNECT_TIMEOUT_S),
            max_retries=0,
        )

    @property
    def base_url(self) -> str:
        return str(self._sdk.base_url)

    def close(self) -> None:
        self._sdk.close()

    def _check_model(self) -> None:
        self._call("model lookup", lambda: self._sdk.models.retrieve(self.model), retry=False)

    def complete(self, prompt: Prompt, max_tokens: int | None = None) -> Completion:
        message = self._send(prompt, max_tokens)
        return self._completion(message, _text(message))

    def structured(self, prompt: Prompt, schema: type[T], max_tokens: int | None = None) -> tuple[T, Completion]:
        if self.structured_mode == "json":
            fmt: Any = {"type": "json_schema", "schema": anthropic.transform_schema(schema)}
            message = self._send(prompt, max_tokens, output_config={"format": fmt})
            completion = self._completion(message, _text(message))
            if message.stop_reason == "refusal":
                raise InvalidAnswer("the model refused", completion)
            return parse_answer(schema, completion), completion

        tool: Any = {
            "name": schema.__name__,
            "description": inspect.cleandoc(schema.__doc__ or f"Give the answer as a {schema.__name__}."),
            "input_schema": schema.model_json_schema(),
        }
        choice: Any = {"type": "tool", "name": schema.__name__}
        message = self._send(prompt, max_tokens, tools=[tool], tool_choice=choice)
        calls = [b for b in message.content if b.type == "tool_use" and b.name == schema.__name__]
        raw = json.dumps(calls[0].input) if calls else _text(message)
        completion = self._completion(message, raw)
        if completion.truncated:
            raise InvalidAnswer(f"cut off at the token limit (stop reason {message.stop_reason!r})", completion)
        if message.stop_reason == "refusal":
            raise InvalidAnswer("the model refused", completion)
        if not calls:
            raise InvalidAnswer(
                f"no call of the tool {schema.__name__} (stop reason {message.stop_reason!r})", completion
            )
        return validate_answer(schema, calls[0].input, completion), completion

    def _send(self, prompt: Prompt, max_tokens: int | None, **options: Any) -> Message:
        system: list[TextBlockParam] = [
            {"type": "text", "text": part, "cache_control": _EPHEMERAL}
            for part in (prompt.system, prompt.static)
            if part
        ]
        user: list[TextBlockParam] = [{"type": "text", "text": prompt.user}]
        if prompt.shared:
            user.insert(0, {"type": "text", "text": prompt.shared, "cache_control": _EPHEMERAL})
        messages: list[MessageParam] = [{"role": "user", "content": user if prompt.shared else prompt.user}]
        limit = self.plan.completion_limit(max_tokens or self.settings.max_tokens)
        if self.plan.family == "anthropic-thinking":
            options["thinking"] = {"type": "enabled", "budget_tokens": self.plan.reasoning_budget}

        def send() -> Message:
            message = self._sdk.messages.create(
                model=self.model,
                max_tokens=limit,
                system=system or anthropic.omit,
                messages=messages,
                **options,
            )
            if message.content is None or message.usage is None or message.model is None:
                raise MalformedResponse("a message without content, usage or model")
            return message

        return self._call("messages", send)

    def _completion(self, message: Message, text: str) -> Completion:
        usage = message.usage
        reasoning = "\n\n".join(b.thinking for b in message.content if b.type == "thinking" and b.thinking)
        return Completion(
            text=text,
            reasoning=reasoning or None,
            usage=self._usage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_input_tokens or 0,
                cache_write_tokens=usage.cache_creation_input_tokens or 0,
            ),
            model=message.model,
            stop_reason=message.stop_reason,
            truncated=message.stop_reason in _TRUNCATED,
            request_id=message._request_id,
        )

    def _classify(self, e: BaseException) -> Failure | None:
        if isinstance(e, anthropic.APIStatusError):
            return Failure(
                status=e.status_code,
                message=_error_message(e.body) or e.message,
                transient=e.status_code in TRANSIENT_STATUS,
                retry_after_s=retry_after_s(e.response.headers),
            )
        if isinstance(e, anthropic.APIConnectionError):
            return connection_failure(e)
        if isinstance(e, MalformedResponse | json.JSONDecodeError | anthropic.APIResponseValidationError):
            return malformed_failure(e)
        return None


def _text(message: Message) -> str:
    return "".join(b.text for b in message.content if b.type == "text")


def _error_message(body: object) -> str | None:
    """The `error.message` of Anthropic's error body {"type": "error", "error": {...}}."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        message = body["error"].get("message")
        return str(message) if message else None
    return None
