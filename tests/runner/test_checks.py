"""The run-time check helpers on CPU tensors (the GPU tests run them end to end)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from htam_graph.runner import checks  # noqa: E402  (needs torch)
from htam_graph.runner.evaluate import to_feedback  # noqa: E402
from htam_graph.runner.models import CheatFinding, CheatKind, EvalResult, Timing, Verdict  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_the_nan_marker_is_a_nan_no_arithmetic_produces(dtype):
    marked = torch.empty(4, dtype=dtype)
    marked.view(checks._INT_OF_SIZE[dtype.itemsize]).fill_(checks.NAN_POISON.bits(dtype))
    assert torch.isnan(marked).all()
    computed = torch.zeros(4, dtype=dtype) / torch.zeros(4, dtype=dtype)
    assert checks.marker_survivors(computed, torch.ones(4, dtype=dtype), checks.NAN_POISON) == 0
    assert checks.marker_survivors(marked, torch.ones(4, dtype=dtype), checks.NAN_POISON) == 4


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_the_garbage_marker_is_large_and_finite(dtype):
    marked = torch.empty(4, dtype=dtype)
    marked.view(checks._INT_OF_SIZE[dtype.itemsize]).fill_(checks.GARBAGE_POISON.bits(dtype))
    assert torch.isfinite(marked).all() and (marked > 1e4).all()


def test_compare_uses_kernelbench_tolerances_and_points_at_the_worst_element():
    ref = torch.zeros(3, 4)
    out = ref.clone()
    out[1, 2] = 5e-5
    assert checks.compare(0, out, ref, None, None).ok
    out[2, 3] = 0.5
    result = checks.compare(0, out, ref, None, None)
    assert not result.ok and result.max_abs == pytest.approx(0.5)
    assert "1 of 12 elements outside atol=0.0001 rtol=0.0001; worst at [2, 3]: got 0.5, expected 0" in result.message
    half = checks.compare(0, out.half(), ref.half() + 0.005, None, None)
    assert "atol=0.01" in half.message


def test_nan_where_the_reference_is_finite_fails_and_shape_mismatch_is_named():
    ref = torch.ones(2, 2)
    out = ref.clone()
    out[0, 0] = float("nan")
    result = checks.compare(0, out, ref, None, None)
    assert not result.ok and result.max_abs == float("inf") and "(1 NaN/Inf)" in result.message
    assert "got shape [4]" in checks.compare(0, torch.ones(4), ref, None, None).message


def test_constant_and_identical_outputs():
    assert checks.is_constant(torch.full((3, 3), 0.5))
    assert not checks.is_constant(torch.arange(4.0)) and not checks.is_constant(torch.ones(1))
    a = [torch.arange(3.0)]
    assert checks.same_values(a, [torch.arange(3.0)]) and not checks.same_values(a, [torch.ones(3)])


def test_the_op_recorder_allows_allocation_and_views_only():
    x = torch.randn(4, 4)
    with checks.OpRecorder() as recorder:
        y = torch.empty_like(x)
        y.view(16).zero_()
        x.t().contiguous()
    assert recorder.disallowed() == []
    with checks.OpRecorder() as recorder:
        torch.relu(x)
        x @ x
    assert recorder.disallowed() == ["aten.relu", "aten.mm"]


def test_a_replaced_judge_function_is_reported(monkeypatch):
    snapshot = checks.JudgeSnapshot([checks])
    assert snapshot.replaced() == []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(checks, "compare", lambda *a, **k: None)
    assert snapshot.replaced() == ["torch.cuda.synchronize", "htam_graph.runner.checks.compare"]


def test_feedback_is_compact():
    result = EvalResult(
        task_id="level1/19_ReLU",
        task_sha256="t",
        candidate_sha256="c",
        candidate_format="native",
        verdict=Verdict.REJECTED,
        errors="",
        max_abs_error=0.0,
        cheats=[CheatFinding(kind=CheatKind.CONSTANT_OUTPUT, detail="output 0 is constant", stage="dynamic")],
        candidate=Timing(median_ms=0.5, mean_ms=0.5, min_ms=0.4, max_ms=0.6, trials=3),
    )
    assert to_feedback(result) == {
        "verdict": "rejected",
        "cheats": ["constant_output: output 0 is constant"],
        "max_abs_error": 0.0,
        "candidate_ms": 0.5,
    }
    host_bound = result.model_copy(update={"candidate": result.candidate.model_copy(update={"host_median_ms": 0.9})})
    assert to_feedback(host_bound)["candidate_host_ms"] == 0.9


def test_early_fraction_counts_only_elements_the_call_changed():
    from htam_graph.runner.checks import early_fraction

    before = torch.tensor([0.0, 1.0, 2.0, 3.0])
    out = torch.tensor([0.0, 5.0, 6.0, 7.0])  # element 0 did not change, so it says nothing
    assert early_fraction([before.clone()], [out], [before]) == 0.0  # stale buffer: honest
    assert early_fraction([out.clone()], [out], [before]) == 1.0  # already final: off-stream work
    half = torch.tensor([0.0, 5.0, 2.0, 3.0])
    assert early_fraction([half], [out], [before]) == pytest.approx(1 / 3)
    assert early_fraction([out.clone()], [out], [out.clone()]) == 0.0  # nothing changed at all


def test_hidden_work_is_what_the_synced_median_adds_beyond_host_latency():
    from htam_graph.runner.timing import hidden_work_ms, hidden_work_tolerance

    honest = Timing(median_ms=0.30, mean_ms=0.3, min_ms=0.29, max_ms=0.4, trials=100, synced_median_ms=0.316)
    assert hidden_work_ms(honest, latency_ms=0.015) == pytest.approx(0.001)
    assert hidden_work_ms(honest, latency_ms=0.015) < hidden_work_tolerance(honest)
    hiding = honest.model_copy(update={"median_ms": 0.02, "synced_median_ms": 0.45})
    assert hidden_work_ms(hiding, latency_ms=0.015) == pytest.approx(0.415)
    assert hidden_work_ms(hiding, latency_ms=0.015) > hidden_work_tolerance(hiding)
    assert hidden_work_ms(honest.model_copy(update={"synced_median_ms": None}), 0.015) == 0.0


def test_cost_is_the_gpu_time_unless_the_host_takes_longer():
    gpu_bound = Timing(median_ms=0.3, mean_ms=0.3, min_ms=0.3, max_ms=0.3, trials=1, host_median_ms=0.04)
    assert gpu_bound.cost_ms == 0.3
    assert gpu_bound.model_copy(update={"host_median_ms": 2.5}).cost_ms == 2.5  # work done on the CPU is paid
    assert gpu_bound.model_copy(update={"host_median_ms": None}).cost_ms == 0.3
