"""What the parent sends a GPU's referee process and what comes back (pickled over a pipe
between trusted processes; the candidate's process never sees this channel)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from htam_graph.runner.build import BuildSettings
from htam_graph.runner.models import EvalResult, HardwareFacts
from htam_graph.runner.sandbox import ON_BY_DEFAULT
from htam_graph.tasks import Task
from htam_graph.vocab import CandidateFormat


class EvalConfig(BaseModel):
    """How one candidate is judged. The defaults follow KernelBench's protocol; the CLI's
    options take their defaults from here."""

    model_config = {"frozen": True}

    correctness_trials: int = Field(5, ge=2, description="input sets drawn by the task's own get_inputs()")
    input_probes: bool = Field(
        True, description="also check signed, large, small and zero-heavy inputs and the fp32 precision probe"
    )
    trials: int = Field(100, ge=1, description="timed runs; the median is reported")
    warmup: int = Field(3, ge=1)
    timed_checks: int = Field(4, ge=0, description="timed runs, chosen at random, whose outputs are also compared")
    seed: int | None = Field(
        None, description="None: inputs drawn from a fresh secret seed per job; an int makes them repeatable"
    )
    atol: float | None = Field(None, description="None: 1e-4 for fp32/fp64, 1e-2 for fp16/bf16")
    rtol: float | None = None
    poison_blocks: int = Field(4, ge=1, description="poisoned blocks per expected output before each call")
    static_checks: bool = Field(True, description="False only to exercise the run-time checks alone")
    sandbox: bool = Field(
        ON_BY_DEFAULT,
        description="confine builds and candidate processes (runner/sandbox.py; --sandbox, the default: "
        "sandbox.ON_BY_DEFAULT, docs/threat-model.md); with --no-sandbox generated code runs with the judge's "
        "privileges, and results say so",
    )
    compile_reference: bool = Field(False, description="also time torch.compile of the reference")
    reference_only: bool = Field(
        False,
        description="time the reference and stop: no candidate is checked or loaded; verdict `checked` with the "
        "reference's timings and roofline (the loop's step 1 states the time to beat)",
    )
    timeout_s: float = Field(120.0, gt=0, description="per candidate, native format")
    kernelbench_timeout_s: float = Field(900.0, gt=0, description="per candidate, load_inline format")
    compile_timeout_s: float = Field(600.0, gt=0, description="added when compile_reference is on")
    startup_timeout_s: float = Field(300.0, gt=0, description="a referee's import of torch and CUDA init")

    def job_timeout(self, fmt: CandidateFormat) -> float:
        """The candidate's budget for one job (its process is killed past it)."""
        return self.kernelbench_timeout_s if fmt == "kernelbench" else self.timeout_s

    def referee_timeout(self, fmt: CandidateFormat) -> float:
        """The parent's budget for a whole job, reference timings included (the referee is
        restarted past it)."""
        return (
            self.job_timeout(fmt) + self.startup_timeout_s + (self.compile_timeout_s if self.compile_reference else 0)
        )


class Job(BaseModel):
    task: Task
    candidate_source: str
    candidate_path: str | None = None
    candidate_sha256: str
    fmt: CandidateFormat
    config: EvalConfig
    build: BuildSettings


class RefereeInfo(BaseModel):
    """Sent once by a referee after CUDA is up."""

    pid: int
    device_index: int
    device: str
    arch: str
    versions: dict[str, str]
    hardware: HardwareFacts | None = Field(None, description="the GPU's facts for the prompts (runner/hardware.py)")


class JobReply(BaseModel):
    result: EvalResult
    restart: bool = Field(description="the referee exits after this reply (its own CUDA context failed)")
