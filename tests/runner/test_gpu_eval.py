"""The runner end to end on a real GPU: honest kernels pass, failures are contained, every
run-time check fires on a candidate built to trip it, and a multi-GiB output is compared
in bounded memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from htam_graph.runner.evaluate import Evaluator
from htam_graph.runner.jobs import EvalConfig
from htam_graph.runner.models import CheatKind, Feedback, Verdict
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
    with Evaluator(EvalConfig(trials=20), workers=1) as ev:
        yield ev


@pytest.fixture(scope="module")
def dynamic_only():
    """Static checks off, so each cheat meets the run-time checks it was built to trip."""
    with Evaluator(EvalConfig(timeout_s=20.0, trials=20, static_checks=False), workers=1) as ev:
        yield ev


@pytest.fixture(scope="module")
def relu_task():
    return load_task(FIXTURES / "relu_small.py")


def test_honest_relu_is_ok_timed_and_placed_on_the_roofline(evaluator, relu_task):
    result = evaluator.evaluate(relu_task, c.HONEST)
    assert result.verdict == Verdict.OK, Feedback.of(result)
    assert result.correct and result.compiled and not result.cheats
    assert result.max_abs_error == 0.0
    assert result.candidate.trials == 20 and result.candidate.median_ms > 0
    assert result.reference_eager.median_ms > 0 and result.speedup_eager > 0
    assert result.device and result.versions["torch"] and result.versions["nvcc"].startswith("release")
    assert {p.name for p in result.probes} >= {"task-1", "normal", "large", "small", "zeros", "precision", "perturbed"}
    line = result.roofline
    assert line.bytes_moved == 2 * 1024 * 1024 * 4 and line.flops == 0 and line.peak_bandwidth_gbs > 1000
    assert 0 < line.bandwidth_fraction < 1.0 and line.floor_ms > 0
    assert result.process_start_seconds is not None and result.process_start_seconds < 10


def test_weights_are_handed_over_by_name(evaluator):
    result = evaluator.evaluate(load_task(FIXTURES / "linear_relu.py"), c.LINEAR_RELU)
    assert result.verdict == Verdict.OK, Feedback.of(result)


def test_wrong_values_are_incorrect_with_the_worst_element(evaluator, relu_task):
    result = evaluator.evaluate(relu_task, c.WRONG_VALUES)
    assert result.verdict == Verdict.INCORRECT
    assert "outside atol=0.0001" in result.errors and "worst at" in result.errors
    assert result.max_abs_error == pytest.approx(1e-2, rel=1e-3)
    assert Feedback.of(result).speedup_eager is None


def test_compile_error_is_condensed_to_the_line(evaluator, relu_task):
    result = evaluator.evaluate(relu_task, c.COMPILE_ERROR)
    assert result.verdict == Verdict.COMPILE_ERROR
    assert "CUDA_SRC line" in result.errors and "undefined_name" in result.errors


def test_bad_launch_arguments_name_the_kernel(evaluator, relu_task):
    result = evaluator.evaluate(relu_task, c.WRONG_ARG_COUNT)
    assert result.verdict == Verdict.RUNTIME_ERROR
    assert "relu_kernel" in result.errors and "takes 3 arguments" in result.errors


def test_hung_kernel_times_out_and_the_next_candidate_is_judged(dynamic_only, relu_task):
    result = dynamic_only.evaluate(relu_task, c.HANG)
    assert result.verdict == Verdict.TIMEOUT, Feedback.of(result)
    assert dynamic_only.evaluate(relu_task, c.HONEST).verdict == Verdict.OK


def test_illegal_access_is_a_runtime_error_and_the_next_candidate_is_judged(evaluator, relu_task):
    result = evaluator.evaluate(relu_task, c.ILLEGAL_ACCESS)
    assert result.verdict == Verdict.RUNTIME_ERROR
    assert "illegal" in result.errors.lower() or "died" in result.errors
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
    results = dynamic_only.evaluate_many([(relu_task, source) for source in CHEATS.values()])
    missed = {}
    for kind, result in zip(CHEATS, results, strict=True):
        found = {f.kind for f in result.cheats}
        if result.verdict != Verdict.REJECTED or kind not in found:
            missed[kind.value] = Feedback.of(result)
    assert not missed, missed
    # Nothing of a cheat carries over: the next honest candidate passes.
    assert dynamic_only.evaluate(relu_task, c.HONEST).verdict == Verdict.OK


@pytest.mark.parametrize("name", ["SIDE_STREAM", "SIDE_STREAM_WAITED", "SIDE_STREAM_WHEN_TIMED"])
def test_work_off_the_timed_stream_is_caught(dynamic_only, relu_task, name):
    """By the held-stream probe, or (work moved off only while timed) by the synced end event."""
    result = dynamic_only.evaluate(relu_task, getattr(c, name))
    assert result.verdict == Verdict.REJECTED, Feedback.of(result)
    assert CheatKind.SIDE_STREAM in {f.kind for f in result.cheats}, Feedback.of(result)


@pytest.mark.parametrize("name", ["JOINED_STREAM", "DEVICE_SYNC"])
def test_honest_streams_and_synchronize_are_not_flagged(dynamic_only, relu_task, name):
    result = dynamic_only.evaluate(relu_task, getattr(c, name))
    assert result.verdict == Verdict.OK, Feedback.of(result)


def test_timing_reports_stream_time_input_sets_and_the_referees_clock(evaluator, relu_task):
    result = evaluator.evaluate(relu_task, c.HONEST)
    t = result.candidate
    assert t.input_sets == 4 and t.synced_median_ms >= t.median_ms > 0
    assert t.wall_median_ms is not None and t.wall_median_ms > t.median_ms


def test_the_comparison_of_a_multi_gib_output_stays_within_a_few_slabs():
    """Two 4 GiB outputs compared on this GPU: the memory the comparison adds is bounded by
    its slabs (CHUNK elements in float64, a few temporaries), not by the output's size."""
    from htam_graph.runner import compare

    n = (4 << 30) // 4
    ref = torch.rand(n, device="cuda")
    out = ref.clone()
    out[n - 1] += 1.0
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    result = compare.compare(0, out, ref)
    added = torch.cuda.max_memory_allocated() - base
    assert not result.ok and result.bad == 1
    assert added < 16 * compare.CHUNK * 8, added  # under 2 GiB, against 32 GiB for float64 copies of both
    del ref, out
    torch.cuda.empty_cache()


def test_a_reference_only_job_times_the_reference_alone(evaluator, relu_task):
    """Step 1's time to beat (issue 34, item 5): no candidate is checked or loaded."""
    config = evaluator.config.model_copy(update={"reference_only": True})
    (result,) = evaluator.evaluate_many([(relu_task, "# the reference's timings only: no candidate\n")], config=config)
    assert result.verdict == Verdict.CHECKED and not result.cheats and result.candidate is None
    assert result.reference_eager.median_ms > 0 and result.atol is None
    assert result.roofline.bytes_moved == 2 * 1024 * 1024 * 4 and result.roofline.bandwidth_fraction < 1.0


def test_the_referee_states_the_gpus_facts(evaluator):
    facts = evaluator.workers_info()[0].hardware
    assert facts.measured and facts.sm_count > 0 and facts.peak_bandwidth_gbs > 1000 and facts.l2_mib > 1
    assert facts.shared_per_block_kib >= 48 and facts.arch.startswith("sm_") and facts.cuda_runtime


def test_a_task_with_a_multi_gib_output_is_judged(evaluator):
    result = evaluator.evaluate(load_task(FIXTURES / "scale_large.py"), c.SCALE_LARGE)
    assert result.verdict == Verdict.OK, Feedback.of(result)
    assert result.roofline.bytes_moved == 2 * (4 << 30)


def test_honest_suite_candidates_are_ok(evaluator):
    """bench/candidates/<level>/<task>.py answers the built-in task <level>/<task>."""
    pairs = [(resolve_task(f"{p.parent.name}/{p.stem}"), p) for p in sorted(HONEST_DIR.glob("level*/*.py"))]
    if not pairs:
        pytest.skip("no honest candidates under bench/candidates")
    results = evaluator.evaluate_many(pairs)
    bad = {r.task_id: Feedback.of(r) for r in results if r.verdict != Verdict.OK}
    assert not bad, bad
