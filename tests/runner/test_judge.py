"""The referee's pipeline on the CPU (tests/runner/fake.py stands in for the candidate's
process): verdicts, the input probes, the checks across calls and the clock check."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn

from htam_graph.runner.build import BuildSettings
from htam_graph.runner.jobs import EvalConfig, Job
from htam_graph.runner.models import CheatKind, EvalResult, Verdict
from htam_graph.runner.referee.judge import Judge
from htam_graph.tasks import Task, load_task
from tests.runner.fake import CpuReferences, FakeProcesses, numpy_kernel

FIXTURES = Path(__file__).parent / "fixtures"


def _relu(x: torch.Tensor) -> torch.Tensor:
    return numpy_kernel(lambda a: np.maximum(a, 0), x)


class HonestRelu(nn.Module):
    def forward(self, x):
        return _relu(x)


class CopyAsRelu(nn.Module):
    """Right on torch.rand inputs only: x is its own ReLU there."""

    def forward(self, x):
        return numpy_kernel(lambda a: a.copy(), x)


class FingerprintCache(nn.Module):
    """Caches on a few sampled values instead of computing."""

    def __init__(self):
        super().__init__()
        self.memo = {}

    def forward(self, x):
        flat = x.numpy().reshape(-1)
        key = tuple(flat[:: max(1, flat.size // 16)].tolist())
        if key not in self.memo:
            self.memo[key] = _relu(x)
        return numpy_kernel(lambda a: a.copy(), self.memo[key])


class AlternatingBuffers(nn.Module):
    """Writes an honest result into one of two buffers it keeps."""

    def __init__(self):
        super().__init__()
        self.buffers = []
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if not self.buffers:
            self.buffers = [torch.empty_like(x), torch.empty_like(x)]
        out = self.buffers[self.calls % 2]
        out.numpy()[...] = np.maximum(x.numpy(), 0)
        return out


class HonestThenStale(nn.Module):
    """Honest for the first calls, then a copy of its last output."""

    def __init__(self, honest_calls=20):
        super().__init__()
        self.calls, self.last, self.honest_calls = 0, None, honest_calls

    def forward(self, x):
        self.calls += 1
        if self.last is None or self.calls <= self.honest_calls:
            self.last = _relu(x)
        return numpy_kernel(lambda a: a.copy(), self.last)


class HonestThenTorch(nn.Module):
    """Its own kernel for the correctness calls (9 here), then PyTorch's op."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return _relu(x) if self.calls <= 10 else torch.relu(x)


class MutatesInput(nn.Module):
    def forward(self, x):
        out = _relu(x)
        x.numpy().reshape(-1)[0] = 123.0
        return out


class Constant(nn.Module):
    def forward(self, x):
        return numpy_kernel(lambda a: np.full_like(a, 0.5), x)


class HalfMatmul(nn.Module):
    """fp32 in and out, operands rounded to fp16 inside (accumulated in fp32, as tensor cores do):
    within KernelBench's 1e-4 on torch.rand inputs."""

    def forward(self, a, b):
        half = lambda t: t.astype(np.float16).astype(np.float32)
        return numpy_kernel(lambda p, q: half(p) @ half(q), a, b)


class Fp32Matmul(nn.Module):
    def forward(self, a, b):
        return numpy_kernel(lambda p, q: p @ q, a, b)


class Linear(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.unused = nn.Parameter(torch.randn(7))  # drawn first: only the hand-over by name makes it right
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        w, b = self.linear.weight.detach(), self.linear.bias.detach()
        return numpy_kernel(lambda p, q, r: p @ q.T + r, x, w, b)


class GemmSumReordered(nn.Module):
    """The same sum of x @ W^T added in another order: x @ (W's column sums), in fp32."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features))

    def forward(self, x):
        w = self.weight.detach()
        return numpy_kernel(lambda p, q: p @ q.sum(axis=0, keepdims=True).T, x, w)


class GemmSumHalf(GemmSumReordered):
    """The GEMM on fp16 operands (as tensor cores would take them), then the sum."""

    def forward(self, x):
        w = self.weight.detach()
        half = lambda t: t.astype(np.float16).astype(np.float32)
        return numpy_kernel(lambda p, q: (half(p) @ half(q).T).sum(axis=1, keepdims=True), x, w)


class SlowerThanReported(nn.Module):
    def forward(self, x):
        time.sleep(0.004)
        return _relu(x)


def _job(task: Task, tmp_path: Path, **config: object) -> Job:
    return Job(
        task=task,
        candidate_source="# a fake candidate: tests/runner/fake.py runs a Python class instead\n",
        candidate_sha256="0" * 64,
        fmt="native",
        config=EvalConfig(static_checks=False, trials=24, timed_checks=4, **config),
        build=BuildSettings(nvcc=Path("/bin/true"), cache_dir=tmp_path, arch="sm_90"),
    )


def judge(
    model_class: type, fixture: str, tmp_path: Path, trial_ms: float | None = None, **config: object
) -> EvalResult:
    """Judge a fake candidate; `trial_ms` is the time it reports per trial (None: the time
    each call really took, so the referee's clock agrees with it)."""
    processes = FakeProcesses(model_class, trial_ms)
    referee = Judge(torch.device("cpu"), CpuReferences(), processes, peaks=None, flush_ms=0.0)
    result, judge_failed = referee.judge(_job(load_task(FIXTURES / fixture), tmp_path, **config))
    assert not judge_failed, result.errors
    assert all(link.closed for link in processes.links)
    return result


def kinds(result: EvalResult) -> set[CheatKind]:
    return {c.kind for c in result.cheats}


def test_an_honest_candidate_is_ok_with_speedups_and_probes(tmp_path):
    result = judge(HonestRelu, "relu_rand_small.py", tmp_path)
    assert result.verdict == Verdict.OK, result.errors
    assert result.correct and result.compiled and result.correctness_trials == 5
    assert result.candidate is not None and result.candidate.trials == 24
    assert result.speedup_eager == pytest.approx(2.0 / result.candidate.median_ms)
    names = {p.name: p.outcome for p in result.probes}
    assert names["normal"] == names["large"] == names["precision"] == names["perturbed"] == "passed"


def test_weights_are_handed_over_by_name(tmp_path):
    assert judge(Linear, "linear_small.py", tmp_path).verdict == Verdict.OK


def test_a_copy_passes_for_relu_on_the_tasks_inputs_but_not_on_signed_ones(tmp_path):
    result = judge(CopyAsRelu, "relu_rand_small.py", tmp_path)
    assert result.verdict == Verdict.INCORRECT
    outcomes = {p.name: p.outcome for p in result.probes}
    assert outcomes["task-1"] == "passed" and outcomes["normal"] == "failed"


def test_a_cache_keyed_on_sampled_values_is_caught_by_the_perturbed_set(tmp_path):
    result = judge(FingerprintCache, "relu_rand_small.py", tmp_path)
    assert result.verdict == Verdict.REJECTED and CheatKind.POINTER_CACHE in kinds(result), result.errors


def test_two_alternating_output_buffers_are_persistent_outputs(tmp_path):
    result = judge(AlternatingBuffers, "relu_rand_small.py", tmp_path)
    assert CheatKind.PERSISTENT_OUTPUT in kinds(result), result.errors


def test_stale_results_after_the_checked_calls_are_a_behaviour_change(tmp_path):
    result = judge(HonestThenStale, "relu_rand_small.py", tmp_path, input_probes=False)
    assert result.verdict == Verdict.REJECTED, result.errors
    assert CheatKind.BEHAVIOUR_CHANGE in kinds(result), result.errors
    assert result.speedup_eager is None  # a rejected candidate gets no speedup


def test_pytorch_ops_after_the_checked_calls_are_recorded(tmp_path):
    result = judge(HonestThenTorch, "relu_rand_small.py", tmp_path, input_probes=False)
    assert CheatKind.TORCH_COMPUTE_OP in kinds(result), result.errors


def test_modified_inputs_and_constant_outputs(tmp_path):
    assert CheatKind.INPUT_MUTATION in kinds(judge(MutatesInput, "relu_rand_small.py", tmp_path))
    assert CheatKind.CONSTANT_OUTPUT in kinds(judge(Constant, "relu_rand_small.py", tmp_path))


def test_half_arithmetic_fails_the_precision_probe_and_fp32_does_not(tmp_path):
    result = judge(HalfMatmul, "matmul_rand_small.py", tmp_path)
    assert CheatKind.PRECISION_DOWNGRADE in kinds(result), result.errors
    assert judge(Fp32Matmul, "matmul_rand_small.py", tmp_path).verdict == Verdict.OK


def test_an_ill_conditioned_task_accepts_another_fp32_order_but_not_half_operands(tmp_path):
    # The fp32 reference is itself further than 1e-4 from float64 here, so two honest fp32
    # orders of the sum differ beyond KernelBench's 1e-4: the task sets' tolerance widens to
    # 16 x the reference's own error, which half operands still miss by far.
    result = judge(GemmSumReordered, "gemm_sum_small.py", tmp_path)
    assert result.verdict == Verdict.OK, result.errors
    assert result.max_abs_error is not None and result.max_abs_error > 1e-4  # beyond KernelBench's own atol
    assert judge(GemmSumHalf, "gemm_sum_small.py", tmp_path).verdict != Verdict.OK


def test_reported_times_far_below_the_referees_clock_are_flagged(tmp_path):
    result = judge(SlowerThanReported, "relu_rand_small.py", tmp_path, trial_ms=0.001, input_probes=False)
    assert CheatKind.TIMER_PATCH in kinds(result), result.errors
    assert "referee's clock" in result.errors


def test_commands_carry_host_copies_of_any_tensor_inside_an_argument():
    from htam_graph.runner.referee.candidate import host_copies

    nested = [3, (torch.ones(2), {"w": torch.zeros(1)})]
    copied = host_copies(nested)
    assert copied[0] == 3 and torch.equal(copied[1][0], torch.ones(2)) and copied[1][1]["w"].device.type == "cpu"
