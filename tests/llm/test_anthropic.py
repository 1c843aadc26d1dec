"""The Anthropic backend through the real SDK against a local server speaking the
Messages API: what is sent (cache_control, schemas), what is read back, and retries."""

from __future__ import annotations

import logging
import time

import pytest
from pydantic import BaseModel, Field

from htam_graph.errors import BackendError, ConfigError
from htam_graph.llm.anthropic_client import AnthropicClient
from htam_graph.llm.base import InvalidAnswer, LLMUnavailable, Prompt, RequestRejected
from htam_graph.loop.clients import make_client
from tests.llm.conftest import ANTHROPIC_MODEL, settings
from tests.llm.fakes import (
    FakeAnthropic,
    Reply,
    anthropic_message,
    closed_port_url,
    text_block,
    thinking_block,
    tool_use_block,
)

PROMPT = Prompt(template="generate", system="You write CUDA kernels.", static="CONTRACT", user="Task: relu")


class Plan(BaseModel):
    """The plan of the next step."""

    strategy: str
    confidence: float = Field(ge=0.0, le=1.0)


def client(server: FakeAnthropic, **overrides: object) -> AnthropicClient:
    made = make_client(settings("anthropic", server.url, **overrides))
    assert isinstance(made, AnthropicClient)
    return made


def test_complete_sends_the_static_prefix_as_cached_system_blocks(anthropic_server: FakeAnthropic) -> None:
    anthropic_server.queue(
        anthropic_message(
            text_block("import torch\n"), text_block("class ModelNew: ..."), cache_write=1000, cache_read=2000
        )
    )
    completion = client(anthropic_server).complete(PROMPT)

    (request,) = anthropic_server.requests
    assert request.path == "/v1/messages"
    assert request.body["system"] == [
        {"type": "text", "text": "You write CUDA kernels.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "CONTRACT", "cache_control": {"type": "ephemeral"}},
    ]
    assert request.body["messages"] == [{"role": "user", "content": "Task: relu"}]
    assert request.body["model"] == ANTHROPIC_MODEL
    assert request.body["max_tokens"] == 16384  # the settings' default
    assert "tools" not in request.body
    assert completion.text == "import torch\nclass ModelNew: ..."
    assert completion.reasoning is None
    assert (completion.model, completion.stop_reason, completion.truncated) == (ANTHROPIC_MODEL, "end_turn", False)
    assert completion.request_id == "req_test_1"
    usage = completion.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_write_tokens, usage.cache_read_tokens) == (
        100,
        50,
        1000,
        2000,
    )
    # Sonnet 5.5: $2 input, $10 output, $2.50 cache write, $0.10 cache read per MTok.
    assert usage.cost_usd == pytest.approx((100 * 2 + 50 * 10 + 1000 * 2.5 + 2000 * 0.1) / 1e6)


def test_empty_parts_are_left_out_and_max_tokens_is_passed(anthropic_server: FakeAnthropic) -> None:
    anthropic_server.queue(anthropic_message(text_block("ok")))
    client(anthropic_server).complete(Prompt(template="t", user="hi"), max_tokens=77)
    (request,) = anthropic_server.requests
    assert "system" not in request.body
    assert request.body["max_tokens"] == 77


def test_thinking_blocks_are_reasoning_not_text(anthropic_server: FakeAnthropic) -> None:
    anthropic_server.queue(anthropic_message(thinking_block("vectorize first"), text_block("the kernel")))
    completion = client(anthropic_server).complete(PROMPT)
    assert (completion.text, completion.reasoning) == ("the kernel", "vectorize first")


def test_max_tokens_stop_marks_the_completion_truncated(anthropic_server: FakeAnthropic) -> None:
    anthropic_server.queue(anthropic_message(text_block("import tor"), stop_reason="max_tokens"))
    completion = client(anthropic_server).complete(PROMPT)
    assert completion.truncated and completion.stop_reason == "max_tokens"


def test_structured_json_mode_sends_the_schema_as_output_format(anthropic_server: FakeAnthropic) -> None:
    anthropic_server.queue(anthropic_message(text_block('{"strategy": "tiling", "confidence": 0.7}')))
    plan, completion = client(anthropic_server).structured(PROMPT, Plan)

    assert plan == Plan(strategy="tiling", confidence=0.7)
    assert completion.text == '{"strategy": "tiling", "confidence": 0.7}'
    (request,) = anthropic_server.requests
    fmt = request.body["output_config"]["format"]
    assert fmt["type"] == "json_schema"
    assert fmt["schema"]["additionalProperties"] is False
    assert set(fmt["schema"]["properties"]) == {"strategy", "confidence"}
    assert "tools" not in request.body and "tool_choice" not in request.body


def test_structured_tool_mode_forces_one_tool_with_the_model_schema(anthropic_server: FakeAnthropic) -> None:
    anthropic_server.queue(
        anthropic_message(tool_use_block("Plan", {"strategy": "fusion", "confidence": 0.5}), stop_reason="tool_use")
    )
    plan, completion = client(anthropic_server, structured_mode="tool").structured(PROMPT, Plan)

    assert plan == Plan(strategy="fusion", confidence=0.5)
    assert completion.text == '{"strategy": "fusion", "confidence": 0.5}'
    (request,) = anthropic_server.requests
    assert request.body["tools"] == [
        {"name": "Plan", "description": "The plan of the next step.", "input_schema": Plan.model_json_schema()}
    ]
    assert request.body["tool_choice"] == {"type": "tool", "name": "Plan"}
    assert request.body["system"][-1]["cache_control"] == {"type": "ephemeral"}


def test_a_tool_answer_that_violates_the_schema_is_invalid_with_its_text_and_usage(
    anthropic_server: FakeAnthropic,
) -> None:
    anthropic_server.queue(
        anthropic_message(tool_use_block("Plan", {"strategy": "fusion", "confidence": 7}), stop_reason="tool_use")
    )
    with pytest.raises(InvalidAnswer, match="confidence") as e:
        client(anthropic_server, structured_mode="tool").structured(PROMPT, Plan)
    assert e.value.raw == '{"strategy": "fusion", "confidence": 7}'
    assert e.value.usage.output_tokens == 50 and e.value.usage.cost_usd


def test_a_tool_mode_answer_without_the_tool_call_is_invalid(anthropic_server: FakeAnthropic) -> None:
    anthropic_server.queue(anthropic_message(text_block("I would rather not.")))
    with pytest.raises(InvalidAnswer, match="no call of the tool Plan") as e:
        client(anthropic_server, structured_mode="tool").structured(PROMPT, Plan)
    assert e.value.raw == "I would rather not."


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (anthropic_message(text_block('{"strategy": "tiling", "confid')), "not JSON"),
        (anthropic_message(text_block('{"strategy": "tiling"}')), "confidence: Field required"),
        (anthropic_message(text_block('{"strategy": "tiling", "confid'), stop_reason="max_tokens"), "cut off"),
        (anthropic_message(text_block(""), stop_reason="refusal"), "refused"),
    ],
)
def test_malformed_truncated_or_refused_json_answers_are_invalid(
    anthropic_server: FakeAnthropic, reply: Reply, reason: str
) -> None:
    anthropic_server.queue(reply)
    with pytest.raises(InvalidAnswer, match=reason):
        client(anthropic_server).structured(PROMPT, Plan)
    assert len(anthropic_server.requests) == 1  # an invalid answer is the loop's to retry


def test_check_looks_the_model_up(anthropic_server: FakeAnthropic) -> None:
    client(anthropic_server).check()
    (request,) = anthropic_server.requests
    assert (request.method, request.path) == ("GET", f"/v1/models/{ANTHROPIC_MODEL}")


def test_check_names_an_unknown_model(anthropic_server: FakeAnthropic) -> None:
    with pytest.raises(ConfigError, match=r"has no model 'claude-nope'.*HTAM_LLM__MODEL") as err:
        client(anthropic_server, model="claude-nope").check()
    assert (err.value.setting, err.value.value) == ("HTAM_LLM__MODEL", "claude-nope")
    assert len(anthropic_server.requests) == 1


def test_check_names_a_rejected_key_without_retrying(anthropic_server: FakeAnthropic) -> None:
    with pytest.raises(
        ConfigError, match=r"rejected the API key \(401: invalid x-api-key\); set ANTHROPIC_API_KEY"
    ) as err:
        client(anthropic_server, api_key="wrong").check()
    assert err.value.setting == "ANTHROPIC_API_KEY" and err.value.value is None  # never the key
    assert len(anthropic_server.requests) == 1


def test_check_names_an_unreachable_endpoint() -> None:
    url = closed_port_url()
    with pytest.raises(BackendError, match=rf"anthropic at {url}.*no answer.*HTAM_LLM__BASE_URL") as err:
        make_client(settings("anthropic", url, max_retries=1)).check()
    assert (err.value.backend, err.value.exit_code) == ("anthropic", 4)


def test_the_key_defaults_to_the_sdk_variable(anthropic_server: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    client(anthropic_server, api_key=None).check()
    assert anthropic_server.requests[0].headers["authorization"] == "Bearer test-key"


def test_a_missing_key_is_a_user_error_before_any_request() -> None:
    with pytest.raises(ConfigError, match="no API key for the anthropic backend: set ANTHROPIC_API_KEY") as err:
        make_client(settings("anthropic", closed_port_url(), api_key=None))
    assert err.value.setting == "ANTHROPIC_API_KEY"


def test_an_unpriced_model_reports_an_unknown_cost(
    anthropic_server: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    anthropic_server.queue(anthropic_message(text_block("ok"), model="claude-fable-5-2"))
    unpriced = client(anthropic_server, model="claude-fable-5-2")
    with caplog.at_level(logging.WARNING):
        unpriced.check()
    assert "no price for model 'claude-fable-5-2'" in caplog.text
    assert unpriced.complete(PROMPT).usage.cost_usd is None


def test_rate_limit_waits_as_long_as_retry_after_says(
    anthropic_server: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    anthropic_server.queue(
        anthropic_server.error(429, "rate limited", retry_after="0.3"), anthropic_message(text_block("ok"))
    )
    start = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="htam_graph.llm.retry"):
        completion = client(anthropic_server).complete(PROMPT)
    assert completion.text == "ok"
    assert time.monotonic() - start >= 0.3
    assert len(anthropic_server.generation_requests()) == 2
    assert "anthropic messages failed (429: rate limited); retry 1 of 3 in 0.30 s" in caplog.text


@pytest.mark.parametrize("status", [500, 502, 503, 504, 529])
def test_transient_errors_are_retried(anthropic_server: FakeAnthropic, status: int) -> None:
    anthropic_server.queue(anthropic_server.error(status, "try again"), anthropic_message(text_block("ok")))
    assert client(anthropic_server).complete(PROMPT).text == "ok"
    assert len(anthropic_server.generation_requests()) == 2


def test_a_malformed_body_is_retried(anthropic_server: FakeAnthropic) -> None:
    anthropic_server.queue(
        Reply(200, b"{not json"), Reply.json(200, {"id": "msg_1"}), anthropic_message(text_block("ok"))
    )
    assert client(anthropic_server).complete(PROMPT).text == "ok"
    assert len(anthropic_server.generation_requests()) == 3


def test_retries_run_out_as_llm_unavailable(anthropic_server: FakeAnthropic, caplog: pytest.LogCaptureFixture) -> None:
    anthropic_server.queue(*[anthropic_server.error(529, "Overloaded")] * 4)
    with caplog.at_level(logging.WARNING), pytest.raises(LLMUnavailable, match=r"529: Overloaded.*after 3 retries"):
        client(anthropic_server).complete(PROMPT)
    assert len(anthropic_server.generation_requests()) == 4
    assert caplog.text.count("anthropic messages failed (529: Overloaded)") == 3


@pytest.mark.parametrize(
    ("status", "error"), [(400, RequestRejected), (401, ConfigError), (403, BackendError), (404, ConfigError)]
)
def test_client_errors_are_not_retried(anthropic_server: FakeAnthropic, status: int, error: type[Exception]) -> None:
    anthropic_server.queue(anthropic_server.error(status, "no"), anthropic_message(text_block("never sent")))
    with pytest.raises(error, match=f"{status}: no"):
        client(anthropic_server).complete(PROMPT)
    assert len(anthropic_server.generation_requests()) == 1


def test_a_lost_connection_is_retried_then_unavailable(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING), pytest.raises(LLMUnavailable, match="no answer: Connection error"):
        make_client(settings("anthropic", closed_port_url())).complete(PROMPT)
    assert caplog.text.count("; retry ") == 3


def test_the_sdk_does_not_retry_on_its_own_and_times_out_as_configured(anthropic_server: FakeAnthropic) -> None:
    made = client(anthropic_server, max_retries=0)
    assert made._sdk.max_retries == 0
    assert (made._sdk.timeout.connect, made._sdk.timeout.read) == (5.0, 10.0)
    anthropic_server.queue(anthropic_server.error(529, "Overloaded"), anthropic_message(text_block("ok")))
    with pytest.raises(LLMUnavailable):
        made.complete(PROMPT)
    assert len(anthropic_server.generation_requests()) == 1
