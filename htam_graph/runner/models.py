"""Result records of the runner: serialisable, replayable by (task, candidate hash).

`EvalResult` is the full record of one judgement; `Feedback` is the compact view of it an
LLM sees (rendered by the loop's Jinja templates, so every field is always present).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from htam_graph.vocab import CandidateFormat, Verdict

__all__ = [
    "BuildResult",
    "CheatFinding",
    "CheatKind",
    "EvalResult",
    "Feedback",
    "ProbeRecord",
    "Roofline",
    "Timing",
    "Verdict",
]


class CheatKind(StrEnum):
    """Every way a candidate can game the judge that the runner catches (docs/judge.md)."""

    TORCH_COMPUTE_OP = "torch_compute_op"  # PyTorch compute (matmul, F.*, nn layers) instead of own kernels
    REFERENCE_FALLBACK = "reference_fallback"  # try/except fallback, using or inheriting the reference Model
    SIDE_STREAM = "side_stream"  # work on another CUDA stream or a thread/process the timer misses
    TIMER_PATCH = "timer_patch"  # tampering with timers, events, synchronize, hooks, or the judge's harness
    FORBIDDEN_IMPORT = "forbidden_import"  # a name outside the import allow-list (ctypes, subprocess, cupy...)
    PRECISION_DOWNGRADE = "precision_downgrade"  # fp16/bf16/tf32 inside an fp32 task
    UNWRITTEN_OUTPUT = "unwritten_output"  # output elements never written (poison survives): stale-memory reuse
    CONSTANT_OUTPUT = "constant_output"  # output constant while the reference's is not
    INPUT_INDEPENDENT = "input_independent"  # output unchanged when the inputs change
    POINTER_CACHE = "pointer_cache"  # result cached across calls, keyed on input buffers or a fingerprint of them
    LAZY_OUTPUT = "lazy_output"  # not a plain torch.Tensor (subclass evaluated later), or not on the GPU
    UNINITIALIZED_READ = "uninitialized_read"  # same inputs, different outputs under different poison
    INPUT_MUTATION = "input_mutation"  # the candidate modified its inputs
    INPUT_ALIAS = "input_alias"  # output shares storage with an input (a view of it)
    BEHAVIOUR_CHANGE = "behaviour_change"  # right on the checked calls, wrong on later (timed) ones
    PERSISTENT_OUTPUT = "persistent_output"  # returns memory it keeps across calls (an earlier call's output)


class CheatFinding(BaseModel):
    kind: CheatKind
    detail: str = Field(description="what was seen, e.g. 'calls torch.matmul at line 12'")
    stage: Literal["static", "dynamic"] = Field(description="source checks, or run-time checks")


class BuildResult(BaseModel):
    ok: bool
    key: str = Field(description="content hash of source + arch + flags + nvcc version")
    arch: str
    cached: bool
    seconds: float
    cubin_path: str | None = None
    cubin_sha256: str | None = Field(None, description="of the cubin's bytes; a cached cubin that differs is rebuilt")
    errors: str = Field("", description="condensed compiler errors, a few lines an LLM can act on")
    log: str = Field("", description="the full compiler output")


class Timing(BaseModel):
    """Per-trial times from the start event to the end event on the timed stream."""

    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    trials: int
    input_sets: int = Field(1, description="separately allocated input sets the trials rotate over")
    synced_median_ms: float | None = Field(
        None, description="median to an event recorded after a device-wide synchronize (host latency included)"
    )
    host_median_ms: float | None = Field(None, description="median host (CPU) time of one call")
    wall_median_ms: float | None = Field(
        None, description="median time of one trial on the referee's clock, for the candidate's own timings"
    )
    samples_ms: list[float] = Field(
        default_factory=list,
        description="every trial's time in order (4 significant digits): the spread a replay draws from",
    )

    @property
    def cost_ms(self) -> float:
        """What one call costs when calls run back to back: the GPU time, or the host's when larger."""
        return max(self.median_ms, self.host_median_ms or 0.0)


class Roofline(BaseModel):
    """Where a timing sits against the device's limits (docs/judge.md, "Roofline")."""

    bytes_moved: int = Field(
        description="inputs, parameters and buffers read once plus outputs written once (referee/roofline.moved_bytes)"
    )
    flops: int = Field(description="floating-point operations of the reference forward (0 when none are counted)")
    peak_bandwidth_gbs: float = Field(description="2 x memory clock x bus width, GB/s")
    peak_tflops: float | None = Field(description="SMs x clock x FLOPs per SM per clock for the task's dtype")
    floor_ms: float = Field(description="max(bytes / peak bandwidth, flops / peak compute)")
    bandwidth_fraction: float | None = Field(None, description="bytes / time over the peak bandwidth")
    compute_fraction: float | None = Field(None, description="flops / time over the peak compute")


class ProbeRecord(BaseModel):
    """One input set the candidate was checked on, or skipped."""

    name: str = Field(description="e.g. 'task-1', 'normal', 'large', 'precision', 'perturbed'")
    outcome: Literal["passed", "failed", "skipped"]
    detail: str = ""


class EvalResult(BaseModel):
    task_id: str
    task_sha256: str
    candidate_sha256: str
    candidate_format: CandidateFormat
    verdict: Verdict
    compiled: bool = False
    correct: bool = False
    errors: str = Field("", description="condensed compile/runtime error excerpt")
    cheats: list[CheatFinding] = Field(default_factory=list)
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    atol: float | None = Field(
        None, description="the largest absolute tolerance a comparison applied (widened where the reference is noisy)"
    )
    atol_default: float | None = Field(None, description="the absolute tolerance before any widening")
    correctness_trials: int = 0
    probes: list[ProbeRecord] = Field(default_factory=list)
    candidate: Timing | None = None
    reference_eager: Timing | None = None
    reference_compile: Timing | None = None
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    roofline: Roofline | None = None
    sandboxed: bool = Field(True, description="False: judged with --no-sandbox (generated code ran unconfined)")
    suspicious: bool = Field(False, description="speedup above 10x or faster than the roofline floor")
    suspicious_reason: str = ""
    verified: bool = Field(
        False,
        description="a suspicious ok result held when judged again in a fresh (sandboxed) process on fresh "
        "inputs; a suspicious result that is not verified earns nothing",
    )
    build_seconds: float | None = None
    eval_seconds: float | None = None
    process_wait_seconds: float | None = Field(
        None, description="how long the job waited for its fresh candidate process (0 when a spare was ready)"
    )
    process_start_seconds: float | None = Field(
        None, description="fork to CUDA ready of that process (hidden when it started as a spare)"
    )
    process_start_stages: dict[str, float] = Field(
        default_factory=dict,
        description="where process_start_seconds went (the process's clock): its walls, the loader of prebuilt "
        "extensions, CUDA",
    )
    stage_seconds: dict[str, float] = Field(
        default_factory=dict, description="where the evaluation's time went, by stage (referee's clock)"
    )
    device: str | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    reused: bool = Field(
        False,
        description="an earlier judgement of the same code for the same task in the same bench, served again "
        "instead of judging it twice (htam bench; --rejudge turns it off)",
    )


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


class Feedback(BaseModel):
    """The compact record of one evaluation an LLM sees. Every field is always present
    (None or empty when it does not apply), so templates render it under StrictUndefined."""

    verdict: Verdict
    errors: str | None
    cheats: list[str]
    max_abs_error: float | None
    max_rel_error: float | None
    atol: float | None = Field(None, description="only when widened above atol_default (the prompt explains it)")
    atol_default: float | None = None
    candidate_ms: float | None
    candidate_host_ms: float | None = Field(
        description="host time of forward, only when it exceeds the GPU time: then the CPU side is what to cut"
    )
    eager_ms: float | None
    compile_ms: float | None
    speedup_eager: float | None = Field(description="only for an ok verdict")
    speedup_compile: float | None = Field(description="only for an ok verdict")
    suspicious: bool
    roofline: Roofline | None

    @classmethod
    def of(cls, result: EvalResult) -> Feedback:
        ok = result.verdict == Verdict.OK
        cand = result.candidate
        host = cand.host_median_ms if cand is not None else None
        return cls(
            verdict=result.verdict,
            errors=result.errors or None,
            cheats=[f"{c.kind.value}: {c.detail}" for c in result.cheats],
            max_abs_error=result.max_abs_error,
            max_rel_error=result.max_rel_error,
            atol=result.atol if result.atol and result.atol_default and result.atol > result.atol_default else None,
            atol_default=result.atol_default,
            candidate_ms=_round(cand.median_ms, 4) if cand is not None else None,
            candidate_host_ms=_round(host, 4)
            if cand is not None and host is not None and host > cand.median_ms
            else None,
            eager_ms=_round(result.reference_eager.median_ms, 4) if result.reference_eager else None,
            compile_ms=_round(result.reference_compile.median_ms, 4) if result.reference_compile else None,
            # A speedup of a rejected or incorrect candidate would reward the cheat that produced it.
            speedup_eager=_round(result.speedup_eager, 3) if ok else None,
            speedup_compile=_round(result.speedup_compile, 3) if ok else None,
            suspicious=result.suspicious,
            roofline=result.roofline if ok else None,
        )


class HardwareFacts(BaseModel):
    """The judging machine's GPU and build, as every method's prompt states them (issue 34,
    item 4). Measured on the referee's GPU (runner/hardware.py); where nothing measured them
    (the stand-in evaluator, an old replay) the unknown ones are None and `measured` False,
    and the prompt says so instead of quoting another GPU's numbers."""

    judged_by: str = Field(description="what judges the candidates, as the prompt says it")
    measured: bool = Field(description="the GPU fields were read from the judging GPU")
    gpu: str | None = Field(None, description="e.g. NVIDIA H200")
    capability: str | None = Field(None, description="compute capability, e.g. 9.0")
    sm_count: int | None = None
    memory_gib: float | None = None
    peak_bandwidth_gbs: float | None = Field(None, description="2 x memory clock x bus width, the roofline's peak")
    l2_mib: float | None = None
    shared_per_block_kib: float | None = Field(None, description="the opt-in maximum of dynamic shared memory")
    shared_per_sm_kib: float | None = None
    registers_per_sm: int | None = None
    max_threads_per_sm: int | None = None
    arch: str = Field(description="the -arch of every build, e.g. sm_90")
    nvcc_flags: list[str] = Field(description="every flag of the candidate build, -arch included")
    nvcc_version: str | None = Field(None, description="'release X.Y, VX.Y.Z' of the nvcc that builds")
    cuda_runtime: str | None = Field(None, description="torch's CUDA runtime version")

    @property
    def nvcc_command(self) -> str:
        return " ".join(["nvcc", "-cubin", *self.nvcc_flags])
