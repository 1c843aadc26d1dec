"""Who judges the loop's candidates: the GPU runner, or a stand-in where there is no GPU.

Every evaluator has a `label` that every output of a run shows, so a number that did
not come from a GPU is never mistaken for one.
"""

from __future__ import annotations

import hashlib
import logging
from types import TracebackType
from typing import Protocol, Self

from htam_graph.runner.build import gpu_arch
from htam_graph.runner.evaluate import Evaluator, precheck
from htam_graph.runner.jobs import EvalConfig
from htam_graph.runner.models import EvalResult, Timing, Verdict
from htam_graph.tasks import Task

log = logging.getLogger(__name__)


class CandidateEvaluator(Protocol):
    label: str  # gpu, stand-in, replay
    device: str  # what judges, as every output says it
    target: str  # the GPU the kernels are for, as the prompts name it

    def evaluate(self, task: Task, source: str) -> EvalResult: ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


class GpuEvaluator:
    """The runner's judge on this machine's GPU (docs/judge.md)."""

    label = "gpu"

    def __init__(self, config: EvalConfig | None = None) -> None:
        self._evaluator = Evaluator(config or EvalConfig(), workers=1)
        self.device = self.target = "GPU"

    def __enter__(self) -> Self:
        self._evaluator.__enter__()
        info = self._evaluator.workers_info()[0]
        self.device = f"{info.device} ({info.arch})"
        self.target = f"an {self.device}"
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._evaluator.__exit__(exc_type, exc, tb)

    def evaluate(self, task: Task, source: str) -> EvalResult:
        return self._evaluator.evaluate(task, source)


STAND_IN_DEVICE = (
    "stand-in evaluator (no GPU): static checks and nvcc builds are real, ok verdicts and times are synthetic"
)


class StandInEvaluator:
    """Stands in for the GPU where there is none (CI, a laptop): the static cheat checks
    and the nvcc build are the runner's own; a candidate that passes both is called `ok`
    with a synthetic time derived from its content hash (eager 1.0 ms, candidate 0.5-2.0
    ms), so the loop, the memory and resumption can be exercised end to end. Every result
    says so in its `device`."""

    label = "stand-in"
    device = STAND_IN_DEVICE

    def __init__(self) -> None:
        self.target = f"an NVIDIA GPU of architecture {gpu_arch()}"

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def evaluate(self, task: Task, source: str) -> EvalResult:
        result = precheck(task, source)
        if result.verdict != Verdict.CHECKED:
            return result.model_copy(update={"device": STAND_IN_DEVICE})
        fraction = int(hashlib.sha256(source.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
        candidate_ms = 0.5 + 1.5 * fraction
        return result.model_copy(
            update={
                "verdict": Verdict.OK,
                "correct": True,
                "candidate": _timing(candidate_ms),
                "reference_eager": _timing(1.0),
                "speedup_eager": 1.0 / candidate_ms,
                "device": STAND_IN_DEVICE,
                "versions": {**result.versions, "evaluator": "stand-in"},
            }
        )


def _timing(ms: float) -> Timing:
    return Timing(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, trials=1)


def make_evaluator(kind: str, config: EvalConfig | None = None) -> CandidateEvaluator:
    """`gpu` or `stand-in` (the CLI validates the name)."""
    if kind == "stand-in":
        return StandInEvaluator()
    return GpuEvaluator(config)
