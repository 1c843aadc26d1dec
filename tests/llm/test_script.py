"""The script backend: the file format, replay in order per template, and the writer's
round trip (what a run records replays to the same texts and answers)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from htam_graph.errors import BadInput
from htam_graph.llm.base import Completion, InvalidAnswer, Prompt, Usage
from htam_graph.llm.script import ScriptClient, ScriptWriter
from htam_graph.llm.settings import LLMSettings
from htam_graph.loop.clients import make_client


class Plan(BaseModel):
    strategy: str
    confidence: float


GENERATE = Prompt(template="generate", user="write the kernel")
PLAN = Prompt(template="plan", user="plan the step")

# A tab and trailing spaces: YAML cannot write these as a block, the writer must still
# round-trip them.
KERNEL = 'import torch\n\nCUDA_SRC = r"""\nextern "C" __global__ void k(float* y) {\n\ty[0] = 1.0f;   \n}\n"""\n'


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_responses_replay_in_order_per_template(tmp_path: Path) -> None:
    (tmp_path / "kernels").mkdir()
    write(tmp_path / "kernels" / "v1.py", "first kernel\n")
    script = write(
        tmp_path / "run.yaml",
        """\
responses:
  - template: generate
    file: kernels/v1.py
  - template: plan
    answer: {strategy: tiling, confidence: 0.5}
    reasoning: tiles fit in shared memory
  - template: generate
    text: |
      second kernel
""",
    )
    client = make_client(LLMSettings(backend="script"), script_path=script)
    client.check()

    plan, completion = client.structured(PLAN, Plan)
    assert plan == Plan(strategy="tiling", confidence=0.5)
    assert completion.reasoning == "tiles fit in shared memory"
    assert completion.usage == Usage() and completion.usage.cost_usd == 0.0
    assert client.complete(GENERATE).text == "first kernel\n"
    assert client.complete(GENERATE).text == "second kernel\n"
    assert client.model == "run.yaml"


def test_running_out_names_the_file_and_the_template(tmp_path: Path) -> None:
    script = write(tmp_path / "run.yaml", "responses:\n  - {template: generate, text: only one}\n")
    client = ScriptClient(script)
    client.complete(GENERATE)
    with pytest.raises(BadInput, match=r"add responses to it or shorten the run") as err:
        client.complete(GENERATE)
    assert (err.value.option, err.value.value, err.value.path) == ("--script", "generate", script)
    assert f"script {script} has no more responses for template 'generate' (1 given)" in str(err.value)
    with pytest.raises(BadInput, match="template 'plan' \\(0 given\\)") as err:
        client.structured(PLAN, Plan)
    assert err.value.value == "plan"


def test_a_json_script_is_read_too(tmp_path: Path) -> None:
    script = write(tmp_path / "run.json", '{"responses": [{"template": "generate", "text": "k"}]}')
    assert ScriptClient(script).complete(GENERATE).text == "k"


def test_a_text_response_to_a_structured_call_must_parse(tmp_path: Path) -> None:
    script = write(
        tmp_path / "run.yaml",
        """\
responses:
  - {template: plan, text: '{"strategy": "fusion", "confidence": 1}'}
  - {template: plan, text: 'not json'}
  - {template: plan, answer: {strategy: fusion}}
""",
    )
    client = ScriptClient(script)
    assert client.structured(PLAN, Plan)[0] == Plan(strategy="fusion", confidence=1)
    with pytest.raises(InvalidAnswer, match="not JSON") as e:
        client.structured(PLAN, Plan)
    assert e.value.raw == "not json"
    with pytest.raises(InvalidAnswer, match="confidence: Field required"):
        client.structured(PLAN, Plan)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "responses:\n  - {template: generate}\n",
            r"responses\[0\]: Value error, give exactly one of text, file, answer",
        ),
        (
            "responses:\n  - {template: g, text: a, file: b}\n",
            r"give exactly one of text, file, answer \(got text, file\)",
        ),
        ("responses:\n  - {template: g, txt: a}\n", r"responses\[0\].txt: Extra inputs are not permitted"),
        ("- {template: g, text: a}\n", r"<top level>: Input should be a valid dictionary"),
        ("responses: [\n", r"is not YAML or JSON"),
        ("responses:\n  - {template: g, file: missing.py}\n", r"cannot read missing.py"),
    ],
)
def test_a_bad_script_is_a_user_error_naming_the_problem(tmp_path: Path, content: str, message: str) -> None:
    script = write(tmp_path / "run.yaml", content)
    with pytest.raises(BadInput, match=message) as err:
        ScriptClient(script)
    assert str(err.value.path).endswith(".py" if "missing.py" in message else "run.yaml")


def test_a_missing_script_file(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="No such file or directory") as err:
        ScriptClient(tmp_path / "nope.yaml")
    assert err.value.path == tmp_path / "nope.yaml"


def test_the_script_backend_needs_a_file() -> None:
    with pytest.raises(BadInput, match=r"the script backend needs a script file of responses \(--script PATH\)"):
        make_client(LLMSettings(backend="script"))


def test_the_catalog_backend_is_the_strategy_catalog() -> None:
    client = make_client(LLMSettings(backend="catalog"))
    # the default is the honest start (the task's base kernel); the tuned start is named
    assert (client.name, client.model) == ("catalog", "catalog-space-v1")
    client.check()
    tuned = make_client(LLMSettings(backend="catalog", model="catalog-v1"))
    assert tuned.model == "catalog-v1"
    tuned.check()
    expected = r"^the strategy catalog is catalog-v1 or catalog-space-v1; --model gpt-x is not one"
    with pytest.raises(BadInput, match=expected) as err:
        make_client(LLMSettings(backend="catalog", model="gpt-x")).check()
    assert (err.value.option, err.value.value) == ("--model", "gpt-x")


def test_the_writer_round_trips_a_run(tmp_path: Path) -> None:
    path = tmp_path / "recorded.yaml"
    writer = ScriptWriter(path)
    usage = Usage(input_tokens=10, output_tokens=5, cost_usd=0.01)
    texts = [KERNEL, "  leading spaces\nno trailing newline", "trailing newlines\n\n\n", "unicode: ×≤é", ""]
    for text in texts:
        writer.record(GENERATE, Completion(text=text, reasoning="why", usage=usage, model="m"))
    plan = Plan(strategy="tiling", confidence=0.25)
    writer.record(PLAN, Completion(text=plan.model_dump_json(), model="m"), answer=plan)
    writer.record(PLAN, Completion(text='{"strategy": "til', model="m", truncated=True))  # an invalid answer

    assert "text: |" in path.read_text()  # code is written as a readable block
    replay = ScriptClient(path)
    for text in texts:
        completion = replay.complete(GENERATE)
        assert (completion.text, completion.reasoning) == (text, "why")
    assert replay.structured(PLAN, Plan)[0] == plan
    with pytest.raises(InvalidAnswer, match="cut off at the token limit"):
        replay.structured(PLAN, Plan)
    assert not list(path.parent.glob(".recorded.yaml.*"))  # no temporary file is left behind
