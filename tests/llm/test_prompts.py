"""The rendered prompts of a 3-step run (tests/llm/loop_harness.py: a correct kernel at
0.797x, a wrong one, one that beats eager), checked against what a model needs (issue 34):
the base it builds on and the last failed candidate beside its feedback, one precision
rule, one prefix per run and one state per step for the prompt cache, no code sent twice.

Golden files (tests/llm/golden/) pin the `feedback` method's prompts, which hold no memory
text: they were read once by hand; after a deliberate change of a template, review the diff
and write them again with UPDATE_GOLDEN=1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from htam_graph.llm.base import Prompt
from htam_graph.templating import render
from htam_graph.vocab import Method
from tests.llm.loop_harness import RecordingWriter, kernel, run_loop

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def prompts_of(method: Method, tmp: Path) -> list[list[Prompt]]:
    """The prompts of each step, in order."""
    writer = RecordingWriter()
    run_loop(method, writer, tmp)
    steps: list[list[Prompt]] = []
    for prompt in writer.prompts:
        if prompt.template in ("select_local", "generate") and not (
            steps and prompt.template == "generate" and steps[-1][-1].template == "select_local"
        ):
            steps.append([])
        steps[-1].append(prompt)
    return steps


def code_of(n: int) -> str:
    return kernel(n).strip()


def test_a_correct_kernel_slower_than_eager_is_the_base_and_the_failed_one_is_shown(tmp_path: Path) -> None:
    steps = prompts_of(Method.HTAM, tmp_path)
    assert [[p.template for p in s] for s in steps] == [["select_local", "generate", "reflect"]] * 3
    step2, step3 = steps[1][1], steps[2][1]
    assert "No candidate beats PyTorch eager yet. The fastest correct candidate: step 1, 0.797x" in step2.shared
    assert code_of(1) in step2.shared and "Write the next version of the fastest correct candidate" in step2.user
    # step 3: still built on step 1's kernel; step 2's wrong kernel shown as a diff beside its feedback
    assert code_of(1) in step3.shared and code_of(2) not in step3.shared
    assert "The last step's candidate (step 2) did not improve on that." in step3.shared
    assert "-    if (i < n) y[i] = fmaxf(x[i], 0.0f);\n+    if (i <= n) y[i]" in step3.shared
    assert "worst at (15, 16383)" in step3.shared
    assert "the strategy's id (one of: " in steps[2][0].user and code_of(1) in steps[2][0].shared


@pytest.mark.parametrize("method", [Method.HTAM, Method.HTAM_NO_LOCAL, Method.FLAT, Method.FEEDBACK, Method.VANILLA])
def test_one_prefix_per_run_one_state_per_step_the_question_last(method: Method, tmp_path: Path) -> None:
    steps = prompts_of(method, tmp_path)
    prompts = [p for s in steps for p in s]
    assert len({(p.system, p.static) for p in prompts}) == 1  # every call of the run: one cached prefix
    assert "## The task: level1/19_ReLU" in prompts[0].static and prompts[0].static.rstrip().endswith("```")
    for index, step in enumerate(steps):
        assert len({p.shared for p in step}) == 1  # every call of the step: one cached state
        for p in step:  # the volatile parts last: the step number only in the question
            assert f"step {index + 1} of" not in p.system + p.static + p.shared
            assert f"step {index + 1} of" in p.user
    memory = method not in (Method.FLAT, Method.FEEDBACK, Method.VANILLA)
    assert ("## The memory's optimization directions" in prompts[0].static) == memory


@pytest.mark.parametrize("method", [Method.HTAM, Method.FEEDBACK])
def test_no_code_is_sent_twice_in_a_step_and_notes_are_cheap(method: Method, tmp_path: Path) -> None:
    steps = prompts_of(method, tmp_path)
    for step in steps[1:]:
        for p in step:  # the base's code is in the (cached) state only, never in a question
            assert code_of(1) not in p.user
    for step in steps:
        reflect = step[-1]
        assert reflect.template == "reflect" and len(reflect.user) < 2500
        assert "as a diff against the code the step built on" in reflect.user or steps.index(step) == 0
    assert "```diff" in steps[2][-1].user and "+// kernel 3" in steps[2][-1].user


def test_vanilla_makes_no_reflection_call(tmp_path: Path) -> None:
    (step,) = prompts_of(Method.VANILLA, tmp_path)
    assert [p.template for p in step] == ["generate"]


def test_one_precision_rule_for_every_method(tmp_path: Path) -> None:
    rule = "in an fp32 task every result must be as accurate as fp32 arithmetic"
    for method in (Method.HTAM, Method.VANILLA):
        for p in (p for s in prompts_of(method, tmp_path / method.value) for p in s):
            assert rule in p.static and "error-compensated 3xTF32" in p.static
            assert "no fp16/bf16/tf32" not in p.system + p.static
            assert "results less accurate than fp32 in fp32 tasks" in " ".join(p.system.split())
            assert "the absolute tolerance widens to 16 times" in p.static


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"no golden file {path}: write it with UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(), f"{name} differs from its golden file: review, then UPDATE_GOLDEN=1"


def test_the_feedback_methods_prompts_match_their_golden_files(tmp_path: Path) -> None:
    steps = prompts_of(Method.FEEDBACK, tmp_path)
    golden("prefix.txt", f"{steps[0][0].system}\n\n=== static ===\n\n{steps[0][0].static}")
    for index in (1, 2):
        generate, reflect = steps[index]
        golden(f"feedback-step{index + 1}-state.txt", generate.shared)
        golden(f"feedback-step{index + 1}-generate.txt", generate.user)
        golden(f"feedback-step{index + 1}-reflect.txt", reflect.user)


def test_the_contract_states_the_build_the_judge_runs() -> None:
    from htam_graph.runner.build import DEFAULT_FLAGS
    from htam_graph.templating import render

    contract = " ".join(render("native_contract").text.split())
    assert f"nvcc -cubin {' '.join(DEFAULT_FLAGS)} -arch=sm_XY" in contract


def test_flat_shows_the_retrieved_steps_weighted_with_their_change(tmp_path: Path) -> None:
    """flat after a feedback run of the same task on the same memory: its generate prompts hold
    the feedback run's steps, most similar first (same task and parent kernel: weight 1), with
    their reward and their change as a diff (prompts/_retrieved.j2); pinned by a golden file."""
    run_loop(Method.FEEDBACK, RecordingWriter(), tmp_path)
    steps = prompts_of(Method.FLAT, tmp_path)
    first = steps[0][0]
    assert first.template == "generate" and "## Similar steps from the memory" in first.user
    assert "- level1/19_ReLU (similarity 1.0)" in first.user and "reward " in first.user
    assert "```diff" in first.user
    assert "## The memory's optimization directions" not in first.static
    golden("flat-step1-generate.txt", first.user)


@pytest.mark.parametrize(
    ("reward_from", "says"),
    [
        ("parent", "than the kernel\nit builds on, and a negative one for being slower (a change within 2.1%"),
        ("best", "a candidate earns a reward only when it is correct and faster than the\nrun's best so far."),
        ("fastest", "a candidate earns a reward only when it is correct and faster than the\nrun's best so far."),
    ],
)
def test_the_system_text_says_what_the_run_rewards(reward_from: str, says: str) -> None:
    """The model is told what scoring.reward_from rewards (the default, parent, in the goldens)."""
    text = render("system", target="an NVIDIA H200 (sm_90)", reward_from=reward_from, deadband=0.03).text
    assert says in text and "A candidate that does not compile" in text
