"""One job in the referee (runner/referee/judge.py): its state, its stages in order, loading
the candidate, and the verdict's roofline position. Correctness (correctness.py) and the
timed runs (timed.py) are stages of their own, on the candidate's memory (calls.py)."""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, TypeVar

import torch

from htam_graph.errors import UserError
from htam_graph.runner import timing
from htam_graph.runner.build import build_cubin, condense_errors, gpu_arch, nvcc_version
from htam_graph.runner.formats import static_cuda_sources
from htam_graph.runner.jobs import Job
from htam_graph.runner.models import CheatFinding, CheatKind, EvalResult, Timing
from htam_graph.runner.protocol import Command, Finish, Finished, Health, Load, Loaded
from htam_graph.runner.referee import inputs as sets
from htam_graph.runner.referee.calls import Calls
from htam_graph.runner.referee.candidate import CandidateLink, Stop, host_copies, sync
from htam_graph.runner.referee.correctness import Correctness
from htam_graph.runner.referee.reference import Reference
from htam_graph.runner.referee.roofline import roofline
from htam_graph.runner.referee.timed import TimedRuns
from htam_graph.runner.referee.tolerance import Tolerances
from htam_graph.runner.static_checks import static_check
from htam_graph.vocab import Verdict

if TYPE_CHECKING:
    from htam_graph.runner.referee.judge import Judge

R = TypeVar("R")

SUSPICIOUS_SPEEDUP = 10.0


def nvcc_of(job: Job) -> str:
    try:
        return nvcc_version(job.build.nvcc)
    except UserError as exc:  # the versions are informative; a missing nvcc shows up at build time
        return f"unavailable ({exc})"


class Case:
    """One job's state and stages."""

    def __init__(self, judge: Judge, job: Job, result: EvalResult) -> None:
        self.judge, self.job, self.result = judge, job, result
        self.config = job.config
        self.device = judge.device
        self.stage = "setup"
        self.link: CandidateLink | None = None
        self.deadline = 0.0
        self.ended: str | None = None
        # Which calls are recorded or compared, and where inputs change: secret, per job.
        seed = self.config.seed if self.config.seed is not None else sets.secret_seed()
        self.rng = random.Random(seed)
        self.generator = torch.Generator(self.device).manual_seed(seed)
        self.tolerances = Tolerances(self.config.atol, self.config.rtol)
        self.calls = Calls(self)

    @contextlib.contextmanager
    def timer(self, stage: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            spent = self.result.stage_seconds.get(stage, 0.0) + time.perf_counter() - began
            self.result.stage_seconds[stage] = round(spent, 4)

    # -- findings --------------------------------------------------------------------------
    def flag(self, kind: CheatKind, detail: str) -> None:
        if kind not in {c.kind for c in self.result.cheats}:
            self.result.cheats.append(CheatFinding(kind=kind, detail=detail, stage="dynamic"))

    def stop_if_flagged(self) -> None:
        if self.result.cheats:
            raise Stop(Verdict.REJECTED, "; ".join(c.detail for c in self.result.cheats))

    def health(self, health: Health, when: str) -> None:
        for entry in health.tampered:
            kind = CheatKind.PRECISION_DOWNGRADE if entry.startswith("changed ") else CheatKind.TIMER_PATCH
            self.flag(kind, f"{when}: {entry}")
        if health.concurrency:
            self.flag(CheatKind.SIDE_STREAM, f"{when} left {health.concurrency} running")

    # -- the pipeline ------------------------------------------------------------------------
    def run(self) -> None:
        job = self.job
        self.stage = "the reference"
        with self.timer("reference"):
            reference = self.judge.references.prepare(job.task, self.config)
        if self.config.static_checks and not self.config.reference_only:
            self.stage = "the static checks"
            dtype = str(reference.dtype).removeprefix("torch.")
            if found := static_check(job.candidate_source, dtype, job.fmt):
                self.result.cheats.extend(found)
                raise Stop(Verdict.REJECTED, "; ".join(f.detail for f in found))
        self.stage = "the reference timings"
        with self.timer("reference"):
            eager, compiled = self.judge.references.timings(reference, self.config, self.judge.gate(job))
        if self.config.reference_only:
            self.result.reference_eager, self.result.reference_compile = eager, compiled
            self.position(reference, eager)  # the reference's own roofline
            self.result.suspicious, self.result.suspicious_reason = False, ""
            self.result.verdict = Verdict.CHECKED
            return
        self.stage = "starting the candidate's process"
        with self.timer("process"), self.timer("process:take"):
            taken = self.judge.processes.take(self.config.startup_timeout_s)
            self.link = taken.link
            self.result.process_start_seconds = taken.start_seconds
            self.result.process_start_stages = {k: round(v, 4) for k, v in taken.start_stages.items()}
            self.result.process_wait_seconds = taken.wait_seconds
            self.judge.processes.warm()  # the next candidate's process starts while this one loads
        self.deadline = time.monotonic() + self.config.job_timeout(job.fmt)
        with self.timer("load"):
            self.load(reference)
        with self.timer("correctness"):
            Correctness(self).run(reference)
        self.stage = "waiting for the next candidate process to start"
        with self.timer("process"), self.timer("process:ready"):  # the next spare is up, the last one gone
            waited = self.judge.processes.wait_ready(self.config.startup_timeout_s)
        for what, seconds in waited.items():
            self.result.stage_seconds[f"process:ready:{what}"] = round(seconds, 4)
        with self.timer("timing"):
            TimedRuns(self).run(reference, eager, compiled)
        self.stage = "finishing"
        self.health(self.request(Finish(), Finished).health, "after the timed runs")
        self.stop_if_flagged()
        self.result.verdict = Verdict.OK

    def request(self, command: Command, expect: type[R]) -> R:
        if self.link is None:
            raise RuntimeError("no candidate process")
        with self.timer(f"candidate:{command.kind}"):  # round trips, the candidate's share of the time
            if self.job.build.sandbox:  # load_cuda runs while loading, or lazily in a first forward
                return self.link.request(command, expect, self.deadline, self._build_for_candidate)
            return self.link.request(command, expect, self.deadline)

    def _build_for_candidate(self, source: str) -> None:
        """A CUDA source the sandboxed candidate composed at run time: built (confined) into
        the cache it reads; a failure is cached as well, and its load reports it."""
        build_cubin(source, self.job.build)

    def end(self, wait: bool = False) -> str:
        """Unmap the candidate's memory and end its process (once). Without `wait`, its
        teardown overlaps the next job's untimed stages; the next timed run waits for it
        (wait_ready)."""
        if self.ended is None and self.link is not None:
            with self.timer("end"):
                self.link.close()
                self.ended = self.judge.processes.end(self.link, wait)
        return self.ended or "not started"

    # -- loading ----------------------------------------------------------------------------
    def prepare_build(self) -> str | None:
        """What the sandboxed candidate's process cannot build itself: its CUDA_SRC literals
        (usually cached already: the Evaluator builds them ahead), or its load_inline
        extensions, built by the confined builder. Returns the extensions folder."""
        job = self.job
        if not job.build.sandbox:
            return None
        self.stage = "building the candidate"
        if job.fmt == "native":
            for text in static_cuda_sources(job.candidate_source):
                build_cubin(text, job.build)  # a failure is cached: the candidate's load reports it
            return None
        arch = job.build.arch or gpu_arch()
        built = self.judge.inline_builder(job.build).build(
            job.candidate_source, arch, max(self.deadline - time.monotonic(), 1.0)
        )
        if built.errors:
            raise Stop(Verdict.COMPILE_ERROR, condense_errors(built.errors))
        return str(built.extensions_dir)

    def load(self, reference: Reference) -> None:
        job = self.job
        with self.timer("build"):
            extensions_dir = self.prepare_build()
        self.stage = "loading the candidate"
        loaded = self.request(
            Load(
                source=job.candidate_source,
                filename=job.candidate_path or f"<candidate {job.candidate_sha256[:12]}>",
                fmt=job.fmt,
                build=job.build,
                seed=reference.seed,
                init_args=host_copies(reference.init_args),
                gate_cubin=timing.cubin(job.build) if self.device.type == "cuda" else b"",
                nvcc_version=nvcc_of(job),
                extensions_dir=extensions_dir,
            ),
            Loaded,
        )
        self.health(loaded.health, "loading the candidate")
        self.stop_if_flagged()
        assert self.link is not None  # set by run before load
        with torch.no_grad():
            for weight in loaded.weights:
                source = reference.state.get(weight.name)
                if source is None or list(source.shape) != weight.tensor.shape:
                    continue
                target = self.link.tensor(weight.tensor)
                if target.dtype == source.dtype:
                    target.copy_(source)
        sync(self.device)
        self.link.release([w.tensor for w in loaded.weights if w.name in reference.state])
        self.result.compiled = True

    # -- the verdict ---------------------------------------------------------------------
    def position(self, reference: Reference, candidate: Timing) -> None:
        """The roofline position, and whether the result is suspiciously fast."""
        reasons = []
        best = max(self.result.speedup_eager or 0.0, self.result.speedup_compile or 0.0)
        if best > SUSPICIOUS_SPEEDUP:
            reasons.append(f"speedup {best:.1f}x above {SUSPICIOUS_SPEEDUP:g}x")
        if self.judge.peaks is not None:
            line = roofline(
                reference.moved_bytes,
                reference.flops,
                reference.dtype,
                self.judge.peaks,
                candidate.median_ms,
            )
            self.result.roofline = line
            if (line.bandwidth_fraction or 0.0) > 1.0 or (line.compute_fraction or 0.0) > 1.0:
                reasons.append(
                    f"faster than the roofline floor ({line.floor_ms:.4f} ms): work skipped, or a shortcut of the task"
                )
        self.result.suspicious = bool(reasons)
        self.result.suspicious_reason = "; ".join(reasons)
