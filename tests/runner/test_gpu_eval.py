"""The runner end to end on a real GPU: honest kernels pass, failures are contained, and
every dynamic cheat check fires on a candidate built to trip it."""

from __future__ import annotations

from pathlib import Path

import pytest

from htam_graph.runner.evaluate import Evaluator, to_feedback
from htam_graph.runner.models import CheatKind, Verdict
from htam_graph.tasks import load_task, resolve_task
from tests.runner import candidates as c

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU"),
]

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[2]
HONEST_DIR = REPO / "bench" / "candidates"


@pytest.fixture(scope="module")
def evaluator():
    with Evaluator(workers=1, trials=20) as ev:
        yield ev


@pytest.fixture(scope="module")
def dynamic_only():
    """Static checks off, so each cheat meets the run-time checks it was built to trip."""
    with Evaluator(workers=1, timeout_s=20.0, trials=20, static_checks=False) as ev:
        yield ev


@pytest.fixture(scope="module")
def relu_task():
    return load_task(FIXTURES / "relu_small.py")


def test_honest_relu_is_ok_and_timed(evaluator, relu_task):
    result = evaluator.evaluate(relu_task, c.HONEST)
    assert result.verdict == Verdict.OK, to_feedback(result)
    assert result.correct and result.compiled and not result.cheats
    assert result.max_abs_error == 0.0
    assert result.candidate.trials == 20 and result.candidate.median_ms > 0
    assert result.reference_eager.median_ms > 0 and result.speedup_eager > 0
    assert result.device and result.versions["torch"] and result.versions["nvcc"].startswith("release")


def test_weights_are_handed_over_by_name(evaluator):
    result = evaluator.evaluate(load_task(FIXTURES / "linear_relu.py"), c.LINEAR_RELU)
    assert result.verdict == Verdict.OK, to_feedback(result)


def test_wrong_values_are_incorrect_with_the_worst_element(evaluator, relu_task):
    result = evaluator.evaluate(relu_task, c.WRONG_VALUES)
    assert result.verdict == Verdict.INCORRECT
    assert "outside atol=0.0001" in result.errors and "worst at" in result.errors
    assert result.max_abs_error == pytest.approx(1e-2, rel=1e-3)


def test_compile_error_is_condensed_to_the_line(evaluator, relu_task):
    result = evaluator.evaluate(relu_task, c.COMPILE_ERROR)
    assert result.verdict == Verdict.COMPILE_ERROR
    assert "CUDA_SRC line" in result.errors and "undefined_name" in result.errors


def test_bad_launch_arguments_name_the_kernel(evaluator, relu_task):
    result = evaluator.evaluate(relu_task, c.WRONG_ARG_COUNT)
    assert result.verdict == Verdict.RUNTIME_ERROR
    assert "relu_kernel" in result.errors and "takes 3 arguments" in result.errors


def test_hung_kernel_times_out_and_the_worker_recovers(dynamic_only, relu_task):
    result = dynamic_only.evaluate(relu_task, c.HANG)
    assert result.verdict == Verdict.TIMEOUT
    assert dynamic_only.evaluate(relu_task, c.HONEST).verdict == Verdict.OK


def test_illegal_access_is_a_runtime_error_and_the_worker_recovers(evaluator, relu_task):
    result = evaluator.evaluate(relu_task, c.ILLEGAL_ACCESS)
    assert result.verdict == Verdict.RUNTIME_ERROR
    assert "illegal" in result.errors.lower()
    assert evaluator.evaluate(relu_task, c.HONEST).verdict == Verdict.OK


CHEATS = {
    CheatKind.UNWRITTEN_OUTPUT: c.UNWRITTEN,
    CheatKind.CONSTANT_OUTPUT: c.CONSTANT,
    CheatKind.INPUT_INDEPENDENT: c.INPUT_INDEPENDENT,
    CheatKind.POINTER_CACHE: c.POINTER_CACHE,
    CheatKind.LAZY_OUTPUT: c.LAZY,
    CheatKind.UNINITIALIZED_READ: c.UNINITIALIZED,
    CheatKind.INPUT_MUTATION: c.MUTATES_INPUT,
    CheatKind.INPUT_ALIAS: c.ALIASES_INPUT,
    CheatKind.TORCH_COMPUTE_OP: c.TORCH_COMPUTE,
    CheatKind.TIMER_PATCH: c.TIMER_PATCH,
    CheatKind.SIDE_STREAM: c.SIDE_THREAD,
    CheatKind.PRECISION_DOWNGRADE: c.TF32,
}


def test_every_dynamic_cheat_is_caught(dynamic_only, relu_task):
    results = dynamic_only.evaluate_many([(relu_task, source) for source in CHEATS.values()], progress=False)
    missed = {}
    for kind, result in zip(CHEATS, results, strict=True):
        found = {f.kind for f in result.cheats}
        if result.verdict != Verdict.REJECTED or kind not in found:
            missed[kind.value] = to_feedback(result)
    assert not missed, missed
    # The worker survives every cheat: an honest candidate still passes afterwards.
    assert dynamic_only.evaluate(relu_task, c.HONEST).verdict == Verdict.OK


@pytest.mark.parametrize("name", ["SIDE_STREAM", "SIDE_STREAM_WAITED", "SIDE_STREAM_WHEN_TIMED"])
def test_work_off_the_timed_stream_is_caught(dynamic_only, relu_task, name):
    """By the held-stream probe, or (work moved off only while timed) by the synced end event."""
    result = dynamic_only.evaluate(relu_task, getattr(c, name))
    assert result.verdict == Verdict.REJECTED, to_feedback(result)
    assert CheatKind.SIDE_STREAM in {f.kind for f in result.cheats}, to_feedback(result)


@pytest.mark.parametrize("name", ["JOINED_STREAM", "DEVICE_SYNC"])
def test_honest_streams_and_synchronize_are_not_flagged(dynamic_only, relu_task, name):
    result = dynamic_only.evaluate(relu_task, getattr(c, name))
    assert result.verdict == Verdict.OK, to_feedback(result)


def test_timing_reports_stream_time_and_input_sets(evaluator, relu_task):
    result = evaluator.evaluate(relu_task, c.HONEST)
    t = result.candidate
    assert t.input_sets == 4 and t.synced_median_ms >= t.median_ms > 0


def test_honest_suite_candidates_are_ok(evaluator):
    """bench/candidates/<level>/<task>.py answers the built-in task <level>/<task>."""
    pairs = [(resolve_task(f"{p.parent.name}/{p.stem}"), p) for p in sorted(HONEST_DIR.glob("level*/*.py"))]
    if not pairs:
        pytest.skip("no honest candidates under bench/candidates")
    results = evaluator.evaluate_many(pairs, progress=False)
    bad = {r.task_id: to_feedback(r) for r in results if r.verdict != Verdict.OK}
    assert not bad, bad
