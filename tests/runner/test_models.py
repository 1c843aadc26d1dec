"""The runner's records: the Feedback an LLM sees, and the cost a speedup is computed from."""

from __future__ import annotations

from htam_graph.runner.models import CheatFinding, CheatKind, EvalResult, Feedback, Roofline, Timing, Verdict


def _result(**update: object) -> EvalResult:
    base = EvalResult(
        task_id="level1/19_ReLU",
        task_sha256="t",
        candidate_sha256="c",
        candidate_format="native",
        verdict=Verdict.OK,
        max_abs_error=0.0,
        candidate=Timing(median_ms=0.5, mean_ms=0.5, min_ms=0.4, max_ms=0.6, trials=3, host_median_ms=0.05),
        reference_eager=Timing(median_ms=1.0, mean_ms=1.0, min_ms=1.0, max_ms=1.0, trials=3),
        speedup_eager=2.0,
        roofline=Roofline(bytes_moved=8, flops=0, peak_bandwidth_gbs=4800.0, peak_tflops=67.0, floor_ms=0.1),
    )
    return base.model_copy(update=update)


def test_feedback_of_an_ok_result_has_every_field():
    feedback = Feedback.of(_result())
    assert feedback.model_dump() == {
        "verdict": Verdict.OK,
        "errors": None,
        "cheats": [],
        "max_abs_error": 0.0,
        "max_rel_error": None,
        "atol": None,  # shown only when widened
        "atol_default": None,
        "candidate_ms": 0.5,
        "candidate_host_ms": None,  # the GPU time is larger: nothing to cut on the host
        "eager_ms": 1.0,
        "compile_ms": None,
        "speedup_eager": 2.0,
        "speedup_compile": None,
        "suspicious": False,
        "roofline": _result().roofline.model_dump(),
    }


def test_a_rejected_result_gets_no_speedup_even_when_it_was_timed():
    cheat = CheatFinding(kind=CheatKind.BEHAVIOUR_CHANGE, detail="timed run 7 was wrong", stage="dynamic")
    feedback = Feedback.of(_result(verdict=Verdict.REJECTED, cheats=[cheat], errors="timed run 7 was wrong"))
    assert feedback.speedup_eager is None and feedback.roofline is None
    assert feedback.cheats == ["behaviour_change: timed run 7 was wrong"]


def test_host_time_is_reported_when_it_exceeds_the_gpu_time():
    host_bound = _result().candidate.model_copy(update={"host_median_ms": 0.9})
    assert Feedback.of(_result(candidate=host_bound)).candidate_host_ms == 0.9


def test_cost_is_the_gpu_time_unless_the_host_takes_longer():
    gpu_bound = Timing(median_ms=0.3, mean_ms=0.3, min_ms=0.3, max_ms=0.3, trials=1, host_median_ms=0.04)
    assert gpu_bound.cost_ms == 0.3
    assert gpu_bound.model_copy(update={"host_median_ms": 2.5}).cost_ms == 2.5
    assert gpu_bound.model_copy(update={"host_median_ms": None}).cost_ms == 0.3
