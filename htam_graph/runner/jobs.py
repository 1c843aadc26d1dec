"""What the parent sends a GPU worker and what comes back (pickled over a pipe)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from htam_graph.runner.formats import Format
from htam_graph.runner.models import EvalResult
from htam_graph.tasks import Task


class EvalConfig(BaseModel):
    """How one candidate is judged; the defaults follow KernelBench's protocol."""

    model_config = {"frozen": True}

    correctness_trials: int = Field(5, ge=2, description="fresh random input sets the candidate must match")
    trials: int = Field(100, ge=1, description="timed runs; the median is reported")
    warmup: int = Field(3, ge=1)
    seed: int = 0
    atol: float | None = Field(None, description="None: 1e-4 for fp32/fp64, 1e-2 for fp16/bf16")
    rtol: float | None = None
    poison_blocks: int = Field(4, ge=1, description="poisoned blocks per expected output before each call")
    static_checks: bool = Field(True, description="False only to exercise the run-time checks alone")
    compile_reference: bool = Field(False, description="also time torch.compile of the reference")
    timeout_s: float = Field(120.0, gt=0, description="per candidate, native format")
    kernelbench_timeout_s: float = Field(900.0, gt=0, description="per candidate, load_inline format")
    compile_timeout_s: float = Field(600.0, gt=0, description="added when compile_reference is on")
    startup_timeout_s: float = Field(300.0, gt=0, description="a worker's import of torch and CUDA init")

    def job_timeout(self, fmt: Format) -> float:
        base = self.kernelbench_timeout_s if fmt == "kernelbench" else self.timeout_s
        return base + (self.compile_timeout_s if self.compile_reference else 0.0)


class Job(BaseModel):
    task: Task
    candidate_source: str
    candidate_path: str | None = None
    candidate_sha256: str
    fmt: Format
    config: EvalConfig


class WorkerInfo(BaseModel):
    """Sent once by a worker after CUDA is up."""

    pid: int
    device_index: int
    device: str
    arch: str
    versions: dict[str, str]


class WorkerReply(BaseModel):
    result: EvalResult
    restart: bool = Field(description="the worker exits after this reply (CUDA error, cheat, crash)")
