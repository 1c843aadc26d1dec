"""The judgement of one candidate, in the referee: no candidate code runs in this process.

The stages, in the order a candidate can fail them (docs/judge.md):
1. static checks of the source (a cheap first line; everything below holds without them);
2. the reference: its model, FLOPs and bytes, and its eager (and torch.compile) timings,
   measured once per task while no candidate process exists;
3. load: a fresh candidate process (runner/forkserver.py) imports the candidate and builds
   ModelNew; the referee writes the reference's weights into its parameters;
4. correctness: the task's own input sets and probes from other distributions
   (referee/inputs.py), each written by the referee into buffers of the candidate's process,
   the outputs compared where they lie (CUDA IPC, in bounded memory), plus checks for
   unwritten and uninitialised memory, cached results, inputs modified or aliased, outputs
   reused across calls, PyTorch ops (sampled) and work off the current stream;
5. timing: the candidate's process times its own trials, one per message; before each the
   referee changes a few input elements in place, after some (chosen at random, and the
   last of each input set) it compares the outputs; its clock must agree with the events;
6. the verdict, speedups from the cached reference timings, the roofline position.

Here the Judge, one job after another; each job is a Case (case.py: its stages in order,
loading, the verdict), with correctness.py and timed.py the stages 4 and 5, calls.py the
candidate's memory and checked calls, tolerance.py what outputs are compared with, and
candidate.py the link to the candidate's process.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import torch

from htam_graph.runner import compare, timing
from htam_graph.runner.build import BuildSettings
from htam_graph.runner.builder import InlineBuilder, inline_root
from htam_graph.runner.ipc import ProtocolViolation
from htam_graph.runner.jobs import Job
from htam_graph.runner.models import CheatKind, EvalResult
from htam_graph.runner.referee.calls import FREE_MARGIN_BYTES, KEEP_CACHED_BYTES, give_back
from htam_graph.runner.referee.candidate import CandidateDied, ProcessSource, Stop
from htam_graph.runner.referee.case import Case, nvcc_of
from htam_graph.runner.referee.reference import References, TaskError
from htam_graph.runner.referee.roofline import DevicePeaks
from htam_graph.vocab import Verdict

logger = logging.getLogger(__name__)


class Judge:
    """Judges jobs one after another on one GPU."""

    def __init__(
        self,
        device: torch.device,
        references: References,
        processes: ProcessSource,
        peaks: DevicePeaks | None,
        flush_ms: float,
        device_name: str = "",
        versions: dict[str, str] | None = None,
    ) -> None:
        self.device, self.references, self.processes = device, references, processes
        self.peaks, self.flush_ms = peaks, flush_ms
        self.device_name, self.versions = device_name, versions or {}
        self._gate: timing.Gate | None = None
        self._inline: dict[Path, InlineBuilder] = {}  # load_inline builds in the sandbox, per cache folder

    def gate(self, job: Job) -> timing.Gate | None:
        """The timing gate kernel, built with the first job's settings (none on a CPU)."""
        if self._gate is None and self.device.type == "cuda":
            self._gate = timing.Gate.build(job.build)
            compare.enable_kernels(job.build)  # built with the same settings, once
        return self._gate

    def inline_builder(self, build: BuildSettings) -> InlineBuilder:
        if build.cache_dir not in self._inline:
            self._inline[build.cache_dir] = InlineBuilder(inline_root(build.cache_dir))
        return self._inline[build.cache_dir]

    def judge(self, job: Job) -> tuple[EvalResult, bool]:
        """The result, and whether the judge itself failed (the referee then restarts)."""
        started = time.perf_counter()
        result = EvalResult(
            task_id=job.task.id,
            task_sha256=job.task.sha256,
            candidate_sha256=job.candidate_sha256,
            candidate_format=job.fmt,
            verdict=Verdict.RUNTIME_ERROR,
            device=self.device_name or None,
            versions={**self.versions, "nvcc": nvcc_of(job)},
            sandboxed=job.build.sandbox,
        )
        judge_failed = False
        case = Case(self, job, result)
        try:
            case.run()
        except Stop as stop:
            result.verdict, result.errors = stop.verdict, stop.errors
        except ProtocolViolation as violation:
            case.flag(CheatKind.TIMER_PATCH, f"the candidate's process broke the judge's protocol: {violation}")
        except CandidateDied:
            status = case.end(wait=True)
            result.verdict = Verdict.RUNTIME_ERROR
            result.errors = f"the candidate's process died ({status}) during {case.stage}"
        except TaskError as exc:
            logger.warning("job for %s: %s", job.task.id, exc)
            result.verdict, result.errors = Verdict.RUNTIME_ERROR, f"the task failed: {exc}"
        except Exception as exc:  # a fault of the judge itself: on the record, and a fresh referee
            logger.exception("judge error on %s (candidate %s)", job.task.id, job.candidate_sha256[:12])
            result.verdict, result.errors = Verdict.RUNTIME_ERROR, f"judge error: {type(exc).__name__}: {exc}"
            judge_failed = True
        finally:
            case.end()
            if self.device.type == "cuda" and torch.cuda.memory_reserved(self.device) > KEEP_CACHED_BYTES:
                give_back(self.device, max(FREE_MARGIN_BYTES, torch.cuda.mem_get_info(self.device)[1] // 4))
        if result.cheats:
            result.verdict = Verdict.REJECTED
            result.errors = result.errors or "; ".join(c.detail for c in result.cheats)
        result.eval_seconds = time.perf_counter() - started
        return result, judge_failed
