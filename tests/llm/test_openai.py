"""The OpenAI-compatible backend through the real SDK against a local server speaking
chat completions: reasoning text, tool calls, JSON mode, cached tokens, errors, retries."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from htam_graph.errors import BackendError, ConfigError
from htam_graph.llm.base import InvalidAnswer, Prompt, RequestRejected
from htam_graph.llm.openai_client import OpenAIClient
from htam_graph.loop.clients import make_client
from tests.llm.conftest import OPENAI_MODEL, settings
from tests.llm.fakes import FakeOpenAI, Reply, chat_completion, closed_port_url

PROMPT = Prompt(template="generate", system="You write CUDA kernels.", static="CONTRACT", user="Task: relu")


class Plan(BaseModel):
    """The plan of the next step."""

    strategy: str
    confidence: float = Field(ge=0.0, le=1.0)


@pytest.fixture
def prices(tmp_path: Path) -> Path:
    """DeepSeek's rates as a user would add them (the shipped table has Claude only)."""
    path = tmp_path / "prices.yaml"
    path.write_text("deepseek-reasoner: {input: 0.55, output: 2.19, cache_read: 0.14}\n")
    return path


def client(server: FakeOpenAI, **overrides: object) -> OpenAIClient:
    made = make_client(settings("openai", server.url + "/v1", **overrides))
    assert isinstance(made, OpenAIClient)
    return made


def test_complete_sends_system_then_user_and_prices_cached_tokens(openai_server: FakeOpenAI, prices: Path) -> None:
    openai_server.queue(
        chat_completion("class ModelNew: ...", prompt_tokens=100, completion_tokens=50, cached_tokens=60)
    )
    completion = client(openai_server, prices=prices).complete(PROMPT)

    (request,) = openai_server.requests
    assert request.path == "/v1/chat/completions"
    assert request.body["messages"] == [
        {"role": "system", "content": "You write CUDA kernels.\n\nCONTRACT"},
        {"role": "user", "content": "Task: relu"},
    ]
    assert (request.body["model"], request.body["max_tokens"]) == (OPENAI_MODEL, 16384)
    assert "tools" not in request.body and "response_format" not in request.body
    assert completion.text == "class ModelNew: ..."
    assert (completion.stop_reason, completion.truncated, completion.request_id) == ("stop", False, "req_openai_1")
    usage = completion.usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens, usage.output_tokens) == (
        40,
        60,
        0,
        50,
    )
    assert usage.cost_usd == pytest.approx((40 * 0.55 + 60 * 0.14 + 50 * 2.19) / 1e6)


def test_deepseek_cache_hits_count_as_cache_reads(openai_server: FakeOpenAI) -> None:
    openai_server.queue(chat_completion("x", prompt_tokens=100, extra_usage={"prompt_cache_hit_tokens": 64}))
    usage = client(openai_server).complete(PROMPT).usage
    assert (usage.input_tokens, usage.cache_read_tokens) == (36, 64)
    assert usage.cost_usd is None  # no price for the model: unknown, not zero


def test_a_missing_usage_is_an_unknown_cost(openai_server: FakeOpenAI, prices: Path) -> None:
    openai_server.queue(chat_completion("x", usage=False))
    assert client(openai_server, prices=prices).complete(PROMPT).usage.cost_usd is None


@pytest.mark.parametrize(
    ("reply", "text", "reasoning"),
    [
        (chat_completion("the kernel", reasoning_content="think first"), "the kernel", "think first"),
        (
            chat_completion("the kernel", extra_message={"reasoning": "vllm names it so"}),
            "the kernel",
            "vllm names it so",
        ),
        (chat_completion("<think>\nstep 1\n</think>\n\nthe kernel"), "the kernel", "step 1"),
        (chat_completion("step 1\n</think>\n\nthe kernel"), "the kernel", "step 1"),  # opened by the chat template
        (chat_completion("plain answer"), "plain answer", None),
        (chat_completion(None, reasoning_content="only thought"), "", "only thought"),
    ],
)
def test_reasoning_is_kept_apart_from_the_answer(
    openai_server: FakeOpenAI, reply: Reply, text: str, reasoning: str | None
) -> None:
    openai_server.queue(reply)
    completion = client(openai_server).complete(PROMPT)
    assert (completion.text, completion.reasoning) == (text, reasoning)


def test_length_finish_marks_the_completion_truncated(openai_server: FakeOpenAI) -> None:
    openai_server.queue(chat_completion("import tor", finish_reason="length"))
    completion = client(openai_server).complete(PROMPT, max_tokens=5)
    assert completion.truncated and openai_server.requests[0].body["max_tokens"] == 5


def test_structured_tool_mode_forces_a_function_with_the_model_schema(openai_server: FakeOpenAI) -> None:
    openai_server.queue(
        chat_completion(tool_calls=[("Plan", '{"strategy": "tiling", "confidence": 0.9}')], finish_reason="tool_calls")
    )
    plan, completion = client(openai_server).structured(PROMPT, Plan)

    assert plan == Plan(strategy="tiling", confidence=0.9)
    assert completion.text == '{"strategy": "tiling", "confidence": 0.9}'
    (request,) = openai_server.requests
    assert request.body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "Plan",
                "description": "The plan of the next step.",
                "parameters": Plan.model_json_schema(),
            },
        }
    ]
    assert request.body["tool_choice"] == {"type": "function", "function": {"name": "Plan"}}


def test_structured_json_mode_asks_for_a_json_object_and_states_the_schema(openai_server: FakeOpenAI) -> None:
    openai_server.queue(chat_completion('```json\n{"strategy": "fusion", "confidence": 0.4}\n```'))
    plan, _ = client(openai_server, structured_mode="json").structured(PROMPT, Plan)

    assert plan == Plan(strategy="fusion", confidence=0.4)
    (request,) = openai_server.requests
    assert request.body["response_format"] == {"type": "json_object"}
    user = request.body["messages"][-1]["content"]
    assert user.startswith("Task: relu\n\nAnswer with one JSON object that matches this JSON schema:\n")
    assert json.loads(user.splitlines()[-1]) == Plan.model_json_schema()
    assert "tools" not in request.body


def test_json_mode_reads_the_answer_after_a_think_block(openai_server: FakeOpenAI) -> None:
    openai_server.queue(chat_completion('<think>hmm</think>{"strategy": "fusion", "confidence": 0.4}'))
    plan, completion = client(openai_server, structured_mode="json").structured(PROMPT, Plan)
    assert plan.strategy == "fusion" and completion.reasoning == "hmm"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (chat_completion(tool_calls=[("Plan", '{"strategy": "tiling", "confidence": 3}')]), "confidence"),
        (chat_completion(tool_calls=[("Plan", '{"strategy": "til')]), "not JSON"),
        (chat_completion("I prefer prose."), "not JSON"),  # no tool call at all
        (chat_completion(tool_calls=[("Plan", '{"strategy": "til')], finish_reason="length"), "cut off"),
    ],
)
def test_bad_structured_answers_are_invalid_with_their_text(
    openai_server: FakeOpenAI, reply: Reply, reason: str
) -> None:
    openai_server.queue(reply)
    with pytest.raises(InvalidAnswer, match=reason) as e:
        client(openai_server).structured(PROMPT, Plan)
    assert e.value.raw and e.value.usage.output_tokens == 50
    assert len(openai_server.requests) == 1


def test_check_lists_the_models(openai_server: FakeOpenAI) -> None:
    client(openai_server).check()
    (request,) = openai_server.requests
    assert (request.method, request.path) == ("GET", "/v1/models")


def test_check_names_an_unknown_model_and_what_is_served(openai_server: FakeOpenAI) -> None:
    with pytest.raises(
        ConfigError, match=r"has no model 'r2' \(it serves: deepseek-reasoner, other-model\); set HTAM_LLM"
    ) as err:
        client(openai_server, model="r2").check()
    assert (err.value.setting, err.value.value) == ("HTAM_LLM__MODEL", "r2")


def test_check_names_a_rejected_key(openai_server: FakeOpenAI) -> None:
    with pytest.raises(
        ConfigError, match=r"rejected the API key \(401: Incorrect API key provided\); set OPENAI_API_KEY"
    ):
        client(openai_server, api_key="wrong").check()
    assert len(openai_server.requests) == 1


def test_check_names_an_unreachable_endpoint() -> None:
    with pytest.raises(BackendError, match=r"openai at .*no answer: Connection error.*HTAM_LLM__BASE_URL") as err:
        make_client(settings("openai", closed_port_url() + "/v1", max_retries=0)).check()
    assert err.value.backend == "openai" and err.value.model is not None


def test_the_model_is_required() -> None:
    with pytest.raises(ConfigError, match="the openai backend needs a model: set HTAM_LLM__MODEL"):
        make_client(settings("openai", "http://127.0.0.1:1/v1", model=None))


def test_the_key_defaults_to_the_sdk_variable(openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    client(openai_server, api_key=None).check()
    with pytest.raises(ConfigError, match="set OPENAI_API_KEY or HTAM_LLM__API_KEY"):
        monkeypatch.delenv("OPENAI_API_KEY")
        client(openai_server, api_key=None)


def test_rate_limit_honours_retry_after_ms(openai_server: FakeOpenAI, caplog: pytest.LogCaptureFixture) -> None:
    openai_server.queue(openai_server.error(429, "slow down", retry_after_ms="200"), chat_completion("ok"))
    start = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="htam_graph.llm.retry"):
        assert client(openai_server).complete(PROMPT).text == "ok"
    assert time.monotonic() - start >= 0.2
    assert "openai chat completions failed (429: slow down); retry 1 of 3 in 0.20 s" in caplog.text


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_server_errors_are_retried(openai_server: FakeOpenAI, status: int) -> None:
    openai_server.queue(openai_server.error(status, "oops"), chat_completion("ok"))
    assert client(openai_server).complete(PROMPT).text == "ok"
    assert len(openai_server.generation_requests()) == 2


def test_a_malformed_body_is_retried(openai_server: FakeOpenAI) -> None:
    openai_server.queue(Reply(200, b"<html>bad gateway</html>"), Reply.json(200, {"id": "x"}), chat_completion("ok"))
    assert client(openai_server).complete(PROMPT).text == "ok"
    assert len(openai_server.generation_requests()) == 3


def test_an_exhausted_quota_is_not_retried(openai_server: FakeOpenAI) -> None:
    openai_server.queue(openai_server.error(429, "You exceeded your current quota", code="insufficient_quota"))
    with pytest.raises(BackendError, match=r"refused the account \(429: You exceeded your current quota\)") as err:
        client(openai_server).complete(PROMPT)
    assert (err.value.backend, err.value.status) == ("openai", 429)
    assert len(openai_server.generation_requests()) == 1


@pytest.mark.parametrize(
    ("status", "error"), [(400, RequestRejected), (401, ConfigError), (403, BackendError), (404, ConfigError)]
)
def test_client_errors_are_not_retried(openai_server: FakeOpenAI, status: int, error: type[Exception]) -> None:
    openai_server.queue(openai_server.error(status, "no"), chat_completion("never sent"))
    with pytest.raises(error, match=f"{status}: no"):
        client(openai_server).complete(PROMPT)
    assert len(openai_server.generation_requests()) == 1
