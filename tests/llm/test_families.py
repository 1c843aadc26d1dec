"""Each model family end to end: a 3-step htam run through the real loop, the real SDK and
a local server that answers (and refuses) as that family's API does
(tests/llm/family_servers.py). The requests must be ones the family accepts, the answers'
reasoning must stay apart from the code, and nothing may fall back silently: every
fallback is a counted event in the step record and the run summary."""

from __future__ import annotations

from pathlib import Path

import pytest

from htam_graph.errors import ConfigError
from htam_graph.llm.family import detect_family, plan_requests
from htam_graph.llm.settings import LLMSettings
from htam_graph.loop.clients import make_client
from htam_graph.loop.optimizer import CHOICE_MAX_TOKENS, CODE_MAX_TOKENS, NOTE_MAX_TOKENS
from htam_graph.vocab import Method, Verdict
from tests.llm.conftest import settings
from tests.llm.family_servers import (
    AnthropicThinkingServer,
    DeepSeekReasonerServer,
    OpenAIReasoningServer,
    call_kind,
)
from tests.llm.loop_harness import run_loop

VERDICTS = [Verdict.OK, Verdict.INCORRECT, Verdict.OK]


@pytest.mark.parametrize(
    ("backend", "model", "family"),
    [
        ("openai", "o4-mini", "openai-reasoning"),
        ("openai", "o3", "openai-reasoning"),
        ("openai", "gpt-5-mini", "openai-reasoning"),
        ("openai", "openai/o1", "openai-reasoning"),
        ("openai", "deepseek-reasoner", "deepseek-reasoner"),
        ("openai", "deepseek-ai/DeepSeek-R1", "deepseek-reasoner"),
        ("openai", "deepseek-r1-distill-qwen-32b", "deepseek-reasoner"),
        ("openai", "Qwen/QwQ-32B", "deepseek-reasoner"),
        ("openai", "deepseek-chat", "chat"),
        ("openai", "gpt-4o", "chat"),
        ("openai", "meta-llama/Llama-3.3-70B-Instruct", "chat"),
        ("anthropic", "claude-sonnet-5-5", "anthropic"),
    ],
)
def test_the_family_is_detected_from_the_model_name(backend: str, model: str, family: str) -> None:
    assert detect_family(backend, model) == family


def test_the_family_setting_overrides_and_is_checked_against_the_backend() -> None:
    plan = plan_requests(LLMSettings(backend="openai", model="my-r1-finetune", family="chat"), "my-r1-finetune")
    assert (plan.family, plan.reasoning, plan.completion_limit(300)) == ("chat", False, 300)
    with pytest.raises(ConfigError, match="not a family of the openai backend") as err:
        plan_requests(LLMSettings(backend="openai", model="x", family="anthropic-thinking"), "x")
    assert (err.value.setting, err.value.value) == ("HTAM_LLM__FAMILY", "anthropic-thinking")
    with pytest.raises(ConfigError, match="does not accept a forced tool call") as err:
        plan_requests(LLMSettings(backend="openai", structured_mode="tool"), "deepseek-reasoner")
    assert (err.value.setting, err.value.value) == ("HTAM_LLM__STRUCTURED_MODE", "tool")


def test_openai_reasoning_model(tmp_path: Path) -> None:
    with OpenAIReasoningServer() as server:
        client = make_client(settings("openai", server.url + "/v1", model="o4-mini", family=None))
        summary, records = run_loop(Method.HTAM, client, tmp_path)
        bodies = [r.body for r in server.generation_requests()]
    assert server.rejected == [] and [r.verdict for r in records] == VERDICTS
    assert summary.events == {} and all(t.events == {} for t in summary.trajectory)
    budget = LLMSettings().reasoning_budget
    limits = {CHOICE_MAX_TOKENS + budget, NOTE_MAX_TOKENS + budget, CODE_MAX_TOKENS + budget}
    for body in bodies:
        assert "max_tokens" not in body and body["max_completion_tokens"] in limits
        assert body["reasoning_effort"] == "medium" and body["messages"][0]["role"] == "developer"
    choices = [b for b in bodies if "tools" in b]
    assert len(choices) == 3 and all(b["tool_choice"]["type"] == "function" for b in choices)
    # one instruction prefix for the whole run: the provider's automatic prefix cache reads it
    assert len({b["messages"][0]["content"] for b in bodies}) == 1
    assert summary.usage.cache_read_tokens > 0 and summary.cached_share is not None
    assert all(t.input_tokens > 0 and t.output_tokens > 0 for t in summary.trajectory)


@pytest.mark.parametrize("think_in_content", [False, True], ids=["reasoning_content", "think-block"])
def test_deepseek_reasoner(think_in_content: bool, tmp_path: Path) -> None:
    with DeepSeekReasonerServer(think_in_content=think_in_content) as server:
        client = make_client(settings("openai", server.url + "/v1", model="deepseek-reasoner", family=None))
        summary, records = run_loop(Method.HTAM, client, tmp_path)
        bodies = [r.body for r in server.generation_requests()]
    assert server.rejected == [] and [r.verdict for r in records] == VERDICTS
    assert summary.events == {}
    budget = LLMSettings().reasoning_budget
    for body in bodies:
        assert "tools" not in body and "tool_choice" not in body and "max_completion_tokens" not in body
        assert body["max_tokens"] in {CHOICE_MAX_TOKENS + budget, NOTE_MAX_TOKENS + budget, CODE_MAX_TOKENS + budget}
    assert sum(b.get("response_format") == {"type": "json_object"} for b in bodies) == 3
    for record in records:  # the thinking is kept, apart from the answers
        assert all(c.reasoning and "thought" in c.reasoning and "<think>" not in c.text for c in record.calls)
        assert record.final.source is not None and "<think>" not in record.final.source
    assert records[0].note.startswith("Bounds-checked ReLU")
    assert summary.usage.cache_read_tokens > 0


def test_a_reasoner_that_thinks_past_its_limit_is_counted_never_silent(tmp_path: Path) -> None:
    """The strategy choice and the note are cut off while reasoning (a budget too small for
    this model): the choice is retried once, then taken by the memory's record; the note is
    the template's. Each is an event in the step record and the run summary."""
    with DeepSeekReasonerServer(reasoning_tokens={"select_local": 5000, "reflect": 5000}) as server:
        client = make_client(settings("openai", server.url + "/v1", family=None, reasoning_budget=2048))
        summary, records = run_loop(Method.HTAM, client, tmp_path)
    assert [r.verdict for r in records] == VERDICTS  # the kernels still came
    step = {"select_local.truncated": 2, "select_local.fallback": 1, "reflect.fallback": 1}
    assert all(r.events() == step for r in records) and all(r.local_fallback for r in records)
    assert summary.events == {kind: 3 * n for kind, n in step.items()}
    assert all(t.events == step for t in summary.trajectory)
    errors = [c.error for c in records[0].calls if c.error]
    assert errors[0] == "cut off at the token limit while still reasoning (stop reason 'length')"
    assert errors[-1] == "no note (cut off while reasoning); the template's note is kept"
    assert records[0].note.startswith(records[0].local_id or "?")  # the template's note


def test_an_openai_refusal_is_an_invalid_answer_counted(tmp_path: Path) -> None:
    class Refusing(OpenAIReasoningServer):
        def next_reply(self):  # type: ignore[no-untyped-def]
            body = self.requests[-1].body
            if "tools" in body:
                from tests.llm.fakes import chat_completion

                return chat_completion(None, extra_message={"refusal": "I can't help with that."}, model="o4-mini")
            return super().next_reply()

    with Refusing() as server:
        client = make_client(settings("openai", server.url + "/v1", model="o4-mini", family=None))
        summary, records = run_loop(Method.HTAM, client, tmp_path, steps=1)
    assert records[0].events() == {"select_local.invalid": 2, "select_local.fallback": 1}
    assert "refused" in (records[0].calls[0].error or "")
    assert summary.events == records[0].events()


def test_anthropic_extended_thinking(tmp_path: Path) -> None:
    with AnthropicThinkingServer() as server:
        client = make_client(settings("anthropic", server.url, family="anthropic-thinking"))
        summary, records = run_loop(Method.HTAM, client, tmp_path)
        bodies = [r.body for r in server.generation_requests()]
    assert server.rejected == [] and [r.verdict for r in records] == VERDICTS
    assert summary.events == {}
    budget = LLMSettings().reasoning_budget
    for body in bodies:
        assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
        assert body["max_tokens"] - budget in {CHOICE_MAX_TOKENS, NOTE_MAX_TOKENS, CODE_MAX_TOKENS}
        assert "tool_choice" not in body
        # breakpoints: the system text, the run's static prefix, the step's state
        assert [b.get("cache_control") for b in body["system"]] == [{"type": "ephemeral"}] * 2
        shared, question = body["messages"][0]["content"]
        assert shared["cache_control"] == {"type": "ephemeral"} and "cache_control" not in question
    assert sum("output_config" in b for b in bodies) == 3
    assert all(c.reasoning and c.reasoning.startswith("The ") for r in records for c in r.calls)
    # every call after the first reads the run's prefix; a step's later calls its state too
    assert summary.cached_share is not None and summary.cached_share > 0.5
    assert all(t.cache_read_tokens > 0 for t in summary.trajectory[1:])


def test_the_cli_flag_sets_the_family(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from htam_graph.cli import cli
    from htam_graph.cli.optimize import settings_with
    from htam_graph.config import Settings

    for command in ("optimize", "bench"):
        result = CliRunner().invoke(cli, [command, "--help"], terminal_width=200)
        assert result.exit_code == 0 and "--llm-family" in result.output and "deepseek-reasoner" in result.output
    cfg = settings_with(Settings(), None, "openai", "my-model", None, "deepseek-reasoner")
    assert (cfg.llm.family, cfg.llm.model) == ("deepseek-reasoner", "my-model")


def test_a_replayed_run_counts_the_same_events(tmp_path: Path) -> None:
    """responses.yaml keeps the cut-off answers as cut off: the script backend replays the
    run with the same fallbacks, notes and events."""
    from htam_graph.llm.script import ScriptClient

    with DeepSeekReasonerServer(reasoning_tokens={"select_local": 5000, "reflect": 5000}) as server:
        client = make_client(settings("openai", server.url + "/v1", family=None, reasoning_budget=2048))
        first, records = run_loop(Method.HTAM, client, tmp_path / "first")
    script = Path(first.folder) / "responses.yaml"
    again, replayed = run_loop(Method.HTAM, ScriptClient(script), tmp_path / "again")
    assert again.events == first.events and [r.note for r in replayed] == [r.note for r in records]
    assert [(r.local_id, r.verdict) for r in replayed] == [(r.local_id, r.verdict) for r in records]


def test_claude_cut_off_while_thinking_is_counted(tmp_path: Path) -> None:
    """stop_reason max_tokens with nothing but a thinking block: the choice is cut off while
    reasoning, retried, then taken by the record; the note falls back to the template."""
    from tests.llm.fakes import anthropic_message, thinking_block

    class CutOff(AnthropicThinkingServer):
        def next_reply(self):  # type: ignore[no-untyped-def]
            reply = super().next_reply()
            body = self.requests[-1].body
            if call_kind(body) in ("select_local", "reflect"):
                return anthropic_message(thinking_block("still thinking"), stop_reason="max_tokens")
            return reply

    with CutOff() as server:
        client = make_client(settings("anthropic", server.url, family="anthropic-thinking"))
        summary, records = run_loop(Method.HTAM, client, tmp_path, steps=1)
    assert server.rejected == []
    assert summary.events == {"reflect.fallback": 1, "select_local.fallback": 1, "select_local.truncated": 2}
    assert records[0].calls[0].error == "cut off at the token limit while still reasoning (stop reason 'max_tokens')"


@pytest.mark.parametrize("family", ["openai-reasoning", "anthropic-thinking"])
def test_a_refused_kernel_is_a_counted_event(family: str, tmp_path: Path) -> None:
    from tests.llm.fakes import anthropic_message, chat_completion, text_block

    class RefusingOpenAI(OpenAIReasoningServer):
        def next_reply(self):  # type: ignore[no-untyped-def]
            reply = super().next_reply()
            if call_kind(self.requests[-1].body) == "generate":
                return chat_completion(None, extra_message={"refusal": "I can't help with that."}, model="o4-mini")
            return reply

    class RefusingAnthropic(AnthropicThinkingServer):
        def next_reply(self):  # type: ignore[no-untyped-def]
            reply = super().next_reply()
            if call_kind(self.requests[-1].body) == "generate":
                return anthropic_message(text_block("I can't help with that."), stop_reason="refusal")
            return reply

    if family == "openai-reasoning":
        server: OpenAIReasoningServer | AnthropicThinkingServer = RefusingOpenAI()
        config = settings("openai", server.url + "/v1", model="o4-mini", family=None)
    else:
        server = RefusingAnthropic()
        config = settings("anthropic", server.url, family="anthropic-thinking")
    with server:
        summary, records = run_loop(Method.HTAM, make_client(config), tmp_path, steps=1)
    assert records[0].verdict == Verdict.NO_CANDIDATE
    assert summary.events == {"generate.refusal": 1}
