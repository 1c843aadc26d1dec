"""Result records of the runner: serialisable, replayable by (task, candidate hash)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from htam_graph.vocab import Verdict

__all__ = ["BuildResult", "CheatFinding", "CheatKind", "EvalResult", "Timing", "Verdict"]


class CheatKind(StrEnum):
    """Every way a candidate can game the judge that the runner catches (KERNELBENCH.md)."""

    TORCH_COMPUTE_OP = "torch_compute_op"  # PyTorch compute (matmul, F.*, nn layers) instead of own kernels
    REFERENCE_FALLBACK = "reference_fallback"  # try/except fallback, using or inheriting the reference Model
    SIDE_STREAM = "side_stream"  # work on another CUDA stream or a thread/process the timer misses
    TIMER_PATCH = "timer_patch"  # monkey-patching timers, events, synchronize, or the judge
    FORBIDDEN_IMPORT = "forbidden_import"  # ctypes, subprocess, raw driver/cupy access, file/network I/O
    PRECISION_DOWNGRADE = "precision_downgrade"  # fp16/bf16/tf32 inside an fp32 task
    UNWRITTEN_OUTPUT = "unwritten_output"  # output elements never written (poison survives): stale-memory reuse
    CONSTANT_OUTPUT = "constant_output"  # output constant while the reference's is not
    INPUT_INDEPENDENT = "input_independent"  # output unchanged when the inputs change
    POINTER_CACHE = "pointer_cache"  # result cached across calls keyed on input buffers
    LAZY_OUTPUT = "lazy_output"  # not a plain torch.Tensor (subclass evaluated later), or not on the GPU
    UNINITIALIZED_READ = "uninitialized_read"  # same inputs, different outputs under different poison
    INPUT_MUTATION = "input_mutation"  # the candidate modified its inputs
    INPUT_ALIAS = "input_alias"  # output shares storage with an input (a view of it)


class CheatFinding(BaseModel):
    kind: CheatKind
    detail: str = Field(description="what was seen, e.g. 'calls torch.matmul at line 12'")
    stage: str = Field(description="'static' (source checks) or 'dynamic' (run-time checks)")


class BuildResult(BaseModel):
    ok: bool
    key: str = Field(description="content hash of source + arch + flags + nvcc version")
    arch: str
    cached: bool
    seconds: float
    cubin_path: str | None = None
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

    @property
    def cost_ms(self) -> float:
        """What one call costs when calls run back to back: the GPU time, or the host's when larger."""
        return max(self.median_ms, self.host_median_ms or 0.0)


class EvalResult(BaseModel):
    task_id: str
    task_sha256: str
    candidate_sha256: str
    candidate_format: str = Field(description="'native' or 'kernelbench'")
    verdict: Verdict
    compiled: bool = False
    correct: bool = False
    errors: str = Field("", description="condensed compile/runtime error excerpt")
    cheats: list[CheatFinding] = Field(default_factory=list)
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    correctness_trials: int = 0
    candidate: Timing | None = None
    reference_eager: Timing | None = None
    reference_compile: Timing | None = None
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    suspicious: bool = Field(False, description="speedup above 10x: flagged for a human look")
    build_seconds: float | None = None
    eval_seconds: float | None = None
    device: str | None = None
    versions: dict[str, str] = Field(default_factory=dict)
