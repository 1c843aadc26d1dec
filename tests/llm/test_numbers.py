"""Numbers that agree (issue 34, item 5): the bytes the task text states are the bytes the
roofline feedback counts (parameters included), a widened tolerance is explained where an
ok kernel's error shows above 1e-4, and step 1 states the reference's time to beat."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from htam_graph.loop.evaluators import StandInEvaluator, reference_of
from htam_graph.loop.optimizer import REFERENCE
from htam_graph.loop.runs import task_context
from htam_graph.runner.models import EvalResult, Feedback, Timing
from htam_graph.runner.referee.roofline import moved_bytes
from htam_graph.tasks import resolve_task
from htam_graph.templating import prompts, render
from htam_graph.vocab import Method, Verdict
from tests.llm.test_prompts import prompts_of


def test_the_task_text_counts_the_bytes_the_roofline_counts_weights_included() -> None:
    task = resolve_task("level2/3_Gemm_Bias_ReLU")
    context = task_context(task)
    module = task.load_module()
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs())  # as the referee builds it, on the CPU here
    inputs = module.get_inputs()
    with torch.no_grad():
        outs = [model(*inputs)]
    assert context.bytes_moved == moved_bytes(inputs, model, outs) == 100_679_680  # x, W, b, out: "100 MB"
    assert context.bytes_moved > sum(t.nbytes for t in (*inputs, *outs))  # the weights count (33.6 MB without)
    assert context.flops == 34_359_738_368
    text = " ".join(render("task", task=context).text.split())
    assert "The judge's roofline counts 100.7 MB moved (every input, parameter and buffer read once" in text
    assert "and 34.4 GFLOP, as the feedback's roofline does" in text


def test_a_tied_parameter_counts_once() -> None:
    class Tied(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Linear(4, 4, bias=False)
            self.b = self.a

    assert moved_bytes([], Tied(), []) == 64


def result(**update: object) -> EvalResult:
    base = EvalResult(
        task_id="t", task_sha256="0" * 64, candidate_sha256="1" * 64, candidate_format="native",
        verdict=Verdict.OK, correct=True, max_abs_error=9e-4, max_rel_error=2e-5,
    )  # fmt: skip
    return base.model_copy(update=update)


def feedback_lines(fb: Feedback) -> str:
    return " ".join(prompts()._env.get_template("_feedback.j2").render(fb=fb).split())


def test_a_widened_tolerance_is_explained_beside_the_error() -> None:
    widened = feedback_lines(Feedback.of(result(atol=1.2e-3, atol_default=1e-4)))
    assert (
        "max abs error 0.0009, max rel error 2e-05 (the absolute tolerance was widened from 0.0001 to 0.0012" in widened
    )
    assert "the fp32 reference itself is that far from a float64 one here" in widened
    plain = feedback_lines(Feedback.of(result(max_abs_error=3e-5, atol=1e-4, atol_default=1e-4)))
    assert "widened" not in plain and Feedback.of(result(atol=1e-4, atol_default=1e-4)).atol is None


def test_step_1_states_the_time_to_beat(tmp_path: Path) -> None:
    for method in (Method.HTAM, Method.FEEDBACK, Method.VANILLA):
        step1 = prompts_of(method, tmp_path / method.value)[0]
        for prompt in step1:
            assert "No correct candidate yet" in prompt.shared
            assert "The time to beat: PyTorch eager takes 0.3 ms per call; it moves 1073.7 MB" in prompt.shared
        saved = json.loads((tmp_path / method.value / "runs" / f"run-{method.value}" / REFERENCE).read_text())
        assert saved["verdict"] == "checked" and saved["reference_eager"]["median_ms"] == 0.3


def test_the_stand_in_and_evaluators_without_a_reference() -> None:
    task = resolve_task("level1/19_ReLU")
    stand_in = reference_of(StandInEvaluator(), task)
    assert stand_in is not None and stand_in.reference_eager == Timing(
        median_ms=1.0, mean_ms=1.0, min_ms=1.0, max_ms=1.0, trials=1
    )
    assert reference_of(object(), task) is None
