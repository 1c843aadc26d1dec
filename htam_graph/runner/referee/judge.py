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
"""

from __future__ import annotations

import contextlib
import logging
import random
import statistics
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

import torch
from torch.utils._pytree import tree_map

from htam_graph.errors import UserError
from htam_graph.runner import compare, timing
from htam_graph.runner.build import BuildSettings, build_cubin, condense_errors, gpu_arch, nvcc_version
from htam_graph.runner.builder import InlineBuilder, inline_root
from htam_graph.runner.formats import static_cuda_sources
from htam_graph.runner.ipc import ProtocolViolation, dtype_name
from htam_graph.runner.jobs import Job
from htam_graph.runner.models import CheatFinding, CheatKind, EvalResult, ProbeRecord, Timing
from htam_graph.runner.protocol import (
    Alloc,
    Allocated,
    Call,
    Called,
    Command,
    Finish,
    Finished,
    Free,
    Freed,
    Health,
    Load,
    Loaded,
    Output,
    PlainArg,
    PoisonName,
    RemoteTensor,
    TensorSpec,
    Trial,
    TrialDone,
    Warmed,
    Warmup,
)
from htam_graph.runner.referee import inputs as sets
from htam_graph.runner.referee.reference import Reference, References, TaskError, timing_set_count
from htam_graph.runner.referee.roofline import DevicePeaks, roofline
from htam_graph.runner.static_checks import static_check
from htam_graph.vocab import Verdict

logger = logging.getLogger(__name__)

R = TypeVar("R")

SUSPICIOUS_SPEEDUP = 10.0
# The referee hands its cached memory back to the driver (empty_cache: about 10 ms) only when
# the GPU runs short: after a job, when it caches more than KEEP_CACHED_BYTES and less than a
# quarter of the GPU (at least FREE_MARGIN_BYTES) is free; after each input set of a task
# whose inputs and outputs exceed LARGE_BYTES, when less than LARGE_FACTOR times them is
# free (float64 copies and temporaries: the candidate's process needs the memory).
KEEP_CACHED_BYTES = 4 * 1024**3
FREE_MARGIN_BYTES = 16 * 1024**3
LARGE_BYTES = 1024**3
LARGE_FACTOR = 6
HOLD_BYTES = 8 * 1024**3  # outputs of earlier calls the candidate's process keeps alive, at most
POISON_BYTES = 16 * 1024**3  # poisoned blocks per call, at most
RECORDED_SHARE = 0.3  # of the correctness calls run under the op recorder (at least one)
RECORDED_TIMED = 2  # untimed, recorded calls slipped in among the timed trials
EARLY_FRACTION = 0.5  # of the changed output final while the stream was held: work off the stream
# The precision probe: the error norm an fp32 computation stays under (docs/judge.md).
PRECISION_RTOL = 1e-4
PRECISION_ATOL = 1e-6
PRECISION_BAND = 0.05  # errors above this share of the norm are plain wrong results, not precision
PRECISION_RATIO = 3.0  # ... and so are errors not this much larger than on the task's own inputs
# On the probe sets an honest kernel may round differently from the reference (cancellation
# in signed sums): its error may reach this multiple of the reference's own error against a
# float64 reference before it counts.
NOISE_FACTOR = 16.0
# The referee's clock: per-trial time the candidate's reported events do not explain.
WALL_SLACK_MS = 1.0
WALL_SLACK_SHARE = 0.25


class Stop(Exception):
    """Ends a job early with a verdict."""

    def __init__(self, verdict: Verdict, errors: str = "") -> None:
        super().__init__(errors)
        self.verdict, self.errors = verdict, errors


class CandidateDied(Exception):
    """The candidate's process closed its channel (it crashed or exited)."""


class CandidateLink(Protocol):
    """The referee's side of one candidate process."""

    pid: int

    def request(
        self, command: Command, expect: type[R], deadline: float, build: Callable[[str], None] | None = None
    ) -> R: ...

    def tensor(self, remote: RemoteTensor) -> torch.Tensor: ...

    def release(self, remotes: list[RemoteTensor]) -> None: ...

    def close(self) -> None: ...


@dataclass
class Taken:
    link: CandidateLink
    start_seconds: float
    wait_seconds: float


class ProcessSource(Protocol):
    """Where fresh candidate processes come from (the fork server)."""

    def take(self, timeout_s: float) -> Taken: ...

    def warm(self) -> None: ...

    def wait_ready(self, timeout_s: float) -> None: ...

    def end(self, link: CandidateLink, wait: bool) -> str:
        """End the candidate's process; with `wait`, once it is gone (for its exit status)."""
        ...


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _extent(remote: RemoteTensor) -> tuple[int, int]:
    """[first byte, past the last byte) of a tensor in the candidate's address space."""
    itemsize = getattr(torch, remote.dtype).itemsize
    span = (sum((n - 1) * s for n, s in zip(remote.shape, remote.stride, strict=True)) + 1) * itemsize
    start = remote.base + remote.offset
    return start, start + span


def _overlaps(extent: tuple[int, int], others: Iterable[tuple[int, int]]) -> bool:
    return any(extent[0] < end and start < extent[1] for start, end in others)


def host_copies(value: Any) -> Any:
    """`value` with every tensor inside it copied to the host: commands are pickled, and a
    pickled CUDA tensor would travel as an IPC handle to the referee's own memory."""
    return tree_map(lambda x: x.cpu() if isinstance(x, torch.Tensor) else x, value)


def _specs(tensors: list[torch.Tensor]) -> list[TensorSpec]:
    return [TensorSpec(shape=tuple(t.shape), dtype=dtype_name(t.dtype)) for t in tensors]


@dataclass(frozen=True)
class _Tolerance:
    atol: float | None
    rtol: float | None
    noise_norm: float | None = None  # ||reference - float64 reference||, when known


@dataclass
class _CandidateSet:
    """One input set: the referee's values and the candidate's buffers (views here)."""

    key: str
    master: list[Any]
    buffers: list[torch.Tensor | None]
    extents: list[tuple[int, int]]
    remotes: list[RemoteTensor]

    def pairs(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [
            (m, b)
            for m, b in zip(self.master, self.buffers, strict=True)
            if isinstance(m, torch.Tensor) and b is not None
        ]


@dataclass
class _Outcome:
    """One checked call: the candidate's outputs (views) and what the comparison found."""

    call: int
    outputs: list[torch.Tensor]
    extents: list[tuple[int, int]]
    failures: list[str]
    comparisons: list[compare.Comparison]
    fingerprints: list[tuple[object, ...]]
    remotes: list[RemoteTensor]

    @property
    def ok(self) -> bool:
        return not self.failures


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
            versions={**self.versions, "nvcc": _nvcc(job)},
            sandboxed=job.build.sandbox,
        )
        judge_failed = False
        case = _Case(self, job, result)
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
                _give_back(self.device, max(FREE_MARGIN_BYTES, torch.cuda.mem_get_info(self.device)[1] // 4))
        if result.cheats:
            result.verdict = Verdict.REJECTED
            result.errors = result.errors or "; ".join(c.detail for c in result.cheats)
        result.eval_seconds = time.perf_counter() - started
        return result, judge_failed


class _Case:
    """One job's state and stages."""

    def __init__(self, judge: Judge, job: Job, result: EvalResult) -> None:
        self.judge, self.job, self.result = judge, job, result
        self.config = job.config
        self.device = judge.device
        self.stage = "setup"
        self.link: CandidateLink | None = None
        self.deadline = 0.0
        self.failures: list[str] = []
        self.task_tolerances: list[_Tolerance] | None = None  # on the task's own inputs; set by correctness
        self.calls = 0
        self.held: deque[tuple[int, list[tuple[int, int]]]] = deque()  # call id, its output extents
        self.ended: str | None = None
        # Which calls are recorded or compared, and where inputs change: secret, per job.
        seed = self.config.seed if self.config.seed is not None else sets.secret_seed()
        self.rng = random.Random(seed)
        self.generator = torch.Generator(self.device).manual_seed(seed)

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
            self._position(reference, eager)  # the reference's own roofline
            self.result.suspicious, self.result.suspicious_reason = False, ""
            self.result.verdict = Verdict.CHECKED
            return
        self.stage = "starting the candidate's process"
        with self.timer("process"):
            taken = self.judge.processes.take(self.config.startup_timeout_s)
            self.link = taken.link
            self.result.process_start_seconds = taken.start_seconds
            self.result.process_wait_seconds = taken.wait_seconds
            self.judge.processes.warm()  # the next candidate's process starts while this one loads
        self.deadline = time.monotonic() + self.config.job_timeout(job.fmt)
        with self.timer("load"):
            self.load(reference)
        with self.timer("correctness"):
            self.correctness(reference)
        self.stage = "waiting for the next candidate process to start"
        with self.timer("process"):
            self.judge.processes.wait_ready(self.config.startup_timeout_s)
        with self.timer("timing"):
            self.timed(reference, eager, compiled)
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

    def release(self, *outcomes: _Outcome) -> None:
        """Unmap outputs the referee no longer reads (the candidate's process may free them)."""
        if self.link is not None:
            self.link.release([r for outcome in outcomes for r in outcome.remotes])

    def free_sets(self, done: list[_CandidateSet]) -> None:
        if done and self.link is not None:
            self.link.release([r for s in done for r in s.remotes])
            self.request(Free(keys=[s.key for s in done]), Freed)

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
                nvcc_version=_nvcc(job),
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

    # -- correctness ------------------------------------------------------------------------
    def correctness(self, reference: Reference) -> None:
        self.stage = "checking correctness"
        cfg = self.config
        recipes = sets.plan(cfg.correctness_trials, cfg.input_probes, reference.dtype == torch.float32, cfg.seed)
        recorded = self._recorded(len(recipes))
        last: tuple[_CandidateSet, _Outcome, list[torch.Tensor]] | None = None
        alive: list[_CandidateSet] = []  # task sets still allocated in the candidate's process
        task_error = 0.0  # the largest relative error norm on the task's own inputs
        previous: tuple[list[tuple[object, ...]], list[tuple[object, ...]]] | None = None
        for index, recipe in enumerate(recipes):
            drawn = sets.generate(reference.module, recipe, self.device)
            expected = reference.forward(drawn)
            tolerances = None
            if recipe.kind == sets.InputKind.TASK and self.task_tolerances is None:
                self.task_tolerances = self._task_tolerances(reference, drawn, expected)
            if recipe.kind != sets.InputKind.TASK:
                if not all(bool(torch.isfinite(t).all()) for t in expected):
                    self._probe(recipe.name, "skipped", "the reference is not finite on these inputs")
                    continue
                tolerances = self._probe_tolerances(reference, drawn, expected)
            del drawn
            current = self.send_set(f"c{index}", sets.generate(reference.module, recipe, self.device))
            outcome = self.checked_call(current, expected, "nan", recipe.name, index in recorded, tolerances=tolerances)
            self._probe(recipe.name, "passed" if outcome.ok else "failed", "; ".join(outcome.failures)[:300])
            self.failures += outcome.failures
            if recipe.kind == sets.InputKind.PRECISION and tolerances is not None:
                self._precision(outcome, tolerances, task_error)
            if recipe.kind == sets.InputKind.TASK:
                task_error = max([task_error, *(c.norm_error for c in outcome.comparisons)])
                self.result.correctness_trials += 1
                refs = [compare.fingerprint(t) for t in expected]
                if previous is not None and outcome.fingerprints == previous[0] and refs != previous[1]:
                    self.flag(
                        CheatKind.INPUT_INDEPENDENT,
                        "outputs identical for different inputs while the reference's differ",
                    )
                previous = (outcome.fingerprints, refs)
                # Earlier task sets stay allocated (within HOLD_BYTES), so each set's buffers
                # have new addresses and a cache keyed on addresses cannot answer a later one.
                alive.append(current)
                while len(alive) > max(1, HOLD_BYTES // max(reference.input_bytes, 1)):
                    self.free_sets([alive.pop(0)])
                if last is not None:
                    self.release(last[1])
                last = (current, outcome, expected)
            else:
                self.release(outcome)
                self.free_sets([current])
            del current, expected, outcome  # large tasks: the next set's values need the memory
            if (size := reference.input_bytes + reference.output_bytes) > LARGE_BYTES:
                _give_back(self.device, LARGE_FACTOR * size)
        if last is not None:
            self.same_buffers(reference, *last)
        self.result.correct = not self.failures
        self.result.errors = "\n".join(self.failures[:3])
        self.stop_if_flagged()
        if self.failures:
            raise Stop(Verdict.INCORRECT, self.result.errors)
        self.free_sets(alive)
        self.request(Free(calls=[c for c, _ in self.held]), Freed)
        self.held.clear()

    def _recorded(self, count: int) -> set[int]:
        if self.job.fmt != "native":
            return set()  # a load_inline extension's own ops are C++ calls, not the dispatcher's
        return set(self.rng.sample(range(count), max(1, round(RECORDED_SHARE * count))))

    def _probe(self, name: str, outcome: Literal["passed", "failed", "skipped"], detail: str = "") -> None:
        self.result.probes.append(ProbeRecord(name=name, outcome=outcome, detail=detail))

    def _task_tolerances(
        self, reference: Reference, drawn: list[Any], expected: list[torch.Tensor]
    ) -> list[_Tolerance]:
        """KernelBench's tolerances on the task's own inputs, widened only where the reference
        itself is further than that from float64: on an ill-conditioned task (a sum over a
        GEMM's output cancels to a small value) two honest fp32 kernels that add in different
        orders differ beyond 1e-4, as much as either differs from the exact result. Measured
        on the first task set of the reference as prepared (the referee keeps one task's, so
        once per job when jobs alternate between tasks); the reference's arithmetic, never
        the candidate's."""
        if reference.task_noise is None:
            deviations = _float64_deviations(reference, drawn, expected)
            reference.task_noise = [d[0] if d is not None else 0.0 for d in deviations]
        found = []
        for ref, distance in zip(expected, reference.task_noise, strict=False):
            atol, rtol = compare.tolerance(ref.dtype, self.config.atol, self.config.rtol)
            if ref.is_floating_point() and NOISE_FACTOR * distance > atol:
                found.append(_Tolerance(NOISE_FACTOR * distance, rtol))
            else:
                found.append(_Tolerance(self.config.atol, self.config.rtol))
        return found

    def _task_tolerance(self, output: int) -> tuple[float | None, float | None]:
        """(atol, rtol) for an output on the task's own inputs (see _task_tolerances)."""
        if self.task_tolerances is not None and output < len(self.task_tolerances):
            tol = self.task_tolerances[output]
            return tol.atol, tol.rtol
        return self.config.atol, self.config.rtol

    def _probe_tolerances(
        self, reference: Reference, drawn: list[Any], expected: list[torch.Tensor]
    ) -> list[_Tolerance]:
        """Tolerances for a probe set: KernelBench's, widened to NOISE_FACTOR times the
        reference's own rounding error (against float64), or, without a float64 reference,
        to the relative tolerance times the output's RMS."""
        found = []
        for ref, deviation in zip(expected, _float64_deviations(reference, drawn, expected), strict=True):
            if not ref.is_floating_point():
                found.append(_Tolerance(self.config.atol, self.config.rtol))
                continue
            atol, rtol = compare.tolerance(ref.dtype, self.config.atol, self.config.rtol)
            if deviation is not None:
                largest, norm = deviation
                found.append(_Tolerance(max(atol, NOISE_FACTOR * largest), rtol, norm))
            else:
                found.append(_Tolerance(max(atol, rtol * compare.rms(ref)), rtol))
        return found

    def _precision(self, outcome: _Outcome, tolerances: list[_Tolerance], task_error: float) -> None:
        """Reduced precision shows as an error that grows with the values (relative), hides
        on the task's non-negative inputs, and shows on the probe's signed full-mantissa
        ones; an error as large on the task's own inputs is a wrong result instead."""
        for i, (cmp, tol) in enumerate(zip(outcome.comparisons, tolerances, strict=False)):
            noise = NOISE_FACTOR * tol.noise_norm if tol.noise_norm is not None else 0.0
            bound = max(PRECISION_RTOL * cmp.ref_sq**0.5, noise) + PRECISION_ATOL * cmp.numel**0.5
            hidden_on_task_inputs = cmp.norm_error > PRECISION_RATIO * task_error
            if bound < cmp.err_sq**0.5 <= PRECISION_BAND * cmp.ref_sq**0.5 and hidden_on_task_inputs:
                self.flag(
                    CheatKind.PRECISION_DOWNGRADE,
                    f"precision probe: output {i} is off by {cmp.norm_error:.2e} of its norm "
                    f"(fp32 arithmetic stays under {PRECISION_RTOL:g}): reduced-precision math in an fp32 task",
                )

    def same_buffers(
        self, reference: Reference, current: _CandidateSet, first: _Outcome, expected: list[torch.Tensor]
    ) -> None:
        """On the last task set, in its own buffers: a second poison, a few elements
        changed, all values rewritten, and the held-stream probe."""
        # Elements already found unwritten explain a difference; ones this call leaves at the
        # new marker do not (a kernel that reads its output buffer copies the marker in).
        unwritten_before = any(c.kind == CheatKind.UNWRITTEN_OUTPUT for c in self.result.cheats)
        again = self.checked_call(current, expected, "garbage", "the same inputs again")
        if not unwritten_before:
            for i, (new, old) in enumerate(zip(again.outputs, first.outputs, strict=False)):
                cmp = compare.compare(i, new, old, *self._task_tolerance(i))
                if not cmp.ok:
                    self.flag(
                        CheatKind.UNINITIALIZED_READ,
                        "the same inputs gave different outputs when free memory held other values: "
                        + cmp.message.split(": ", 1)[-1],
                    )
        self.release(again, first)
        previous = expected
        for name, hold in (("perturbed", False), ("rewritten", False), ("held stream", True)):
            if name == "perturbed":
                sets.perturb(current.pairs(), self.generator)
                sync(self.device)
            else:
                self._rewrite(reference, current)
            now = reference.forward(current.master)
            outcome = self.checked_call(current, now, "nan", name, hold=hold)
            # Wrong on the changed inputs and right for the old ones: a result kept from before.
            stale = (
                not outcome.ok
                and len(outcome.outputs) == len(previous)
                and all(
                    compare.compare(i, out, old, *self._task_tolerance(i)).ok
                    for i, (out, old) in enumerate(zip(outcome.outputs, previous, strict=True))
                )
            )
            self.release(outcome)
            if name == "perturbed":
                self._probe(name, "passed" if outcome.ok else "failed", "; ".join(outcome.failures)[:300])
            if stale:
                change = "a few input elements changed" if name == "perturbed" else "new values were written"
                self.flag(
                    CheatKind.POINTER_CACHE,
                    f"after {change} in place ({name}), forward returned the result for the old values: "
                    + outcome.failures[0],
                )
            self.failures += outcome.failures
            previous = now

    def _rewrite(self, reference: Reference, current: _CandidateSet) -> None:
        """Every element of every input tensor drawn afresh (the task's get_inputs() under a
        new secret seed), in the candidate's buffers, which keep their addresses: nothing
        it saw before predicts any of it. The new values become the referee's copy."""
        fresh = sets.task_inputs(reference.module, sets.secret_seed(), self.device)
        for i, (old, theirs) in enumerate(zip(current.master, current.buffers, strict=True)):
            new = fresh[i] if i < len(fresh) else None
            if theirs is None or not isinstance(old, torch.Tensor) or not isinstance(new, torch.Tensor):
                continue
            if new.shape != old.shape or new.dtype != old.dtype:
                raise TaskError(f"get_inputs() drew input {i} with another shape or dtype under another seed")
            current.master[i] = new
            theirs.copy_(new)
        sync(self.device)

    def send_set(self, key: str, master: list[Any]) -> _CandidateSet:
        """Allocate an input set in the candidate's process and write its values there."""
        args = [
            TensorSpec(shape=tuple(x.shape), dtype=dtype_name(x.dtype))
            if isinstance(x, torch.Tensor)
            else PlainArg(value=host_copies(x))
            for x in master
        ]
        allocated = self.request(Alloc(key=key, args=args), Allocated)
        if len(allocated.tensors) != len(master):
            raise ProtocolViolation(f"{len(allocated.tensors)} buffers for {len(master)} inputs")
        assert self.link is not None
        buffers: list[torch.Tensor | None] = []
        extents = []
        remotes = []
        for value, remote in zip(master, allocated.tensors, strict=True):
            if not isinstance(value, torch.Tensor):
                buffers.append(None)
                continue
            if remote is None or tuple(remote.shape) != tuple(value.shape) or remote.dtype != dtype_name(value.dtype):
                raise ProtocolViolation("an input buffer of another shape or dtype than asked for")
            buffer = self.link.tensor(remote)
            buffer.copy_(value)
            buffers.append(buffer)
            extents.append(_extent(remote))
            remotes.append(remote)
        sync(self.device)
        return _CandidateSet(key, master, buffers, extents, remotes)

    def checked_call(
        self,
        current: _CandidateSet,
        expected: list[torch.Tensor],
        poison: PoisonName | None,
        label: str,
        record: bool = False,
        hold: bool = False,
        tolerances: list[_Tolerance] | None = None,
    ) -> _Outcome:
        """forward on one input set, and every check of its outputs."""
        self.calls += 1
        out_bytes = sum(t.nbytes for t in expected)
        called = self.request(
            Call(
                call=self.calls,
                key=current.key,
                poison=poison,
                poison_blocks=max(1, min(self.config.poison_blocks, POISON_BYTES // max(out_bytes, 1))),
                outputs=_specs(expected),
                record_ops=record,
                hold_stream=hold,
            ),
            Called,
        )
        when = f"forward on the {label} inputs"
        self.health(called.health, when)
        if called.ops:
            self.flag(CheatKind.TORCH_COMPUTE_OP, f"{when} ran PyTorch compute ops: " + ", ".join(called.ops[:8]))
        if called.early_fraction is not None and called.early_fraction > EARLY_FRACTION:
            self.flag(
                CheatKind.SIDE_STREAM,
                f"{called.early_fraction:.0%} of the output was final while torch's current stream was still "
                "blocked: the work ran on another stream or thread",
            )
        outcome = self.check_outputs(self.calls, called.outputs, expected, current, poison, when, tolerances)
        # Persistent outputs are found against the outputs the candidate's process still holds.
        self.held.append((self.calls, outcome.extents))
        hold_count = max(1, min(8, HOLD_BYTES // max(out_bytes, 1)))
        while len(self.held) > hold_count:
            old, _ = self.held.popleft()
            self.request(Free(calls=[old]), Freed)
        return outcome

    def check_outputs(
        self,
        call: int,
        outputs: list[Output],
        expected: list[torch.Tensor],
        current: _CandidateSet,
        poison: PoisonName | None,
        when: str,
        tolerances: list[_Tolerance] | None = None,
    ) -> _Outcome:
        assert self.link is not None
        remotes: list[RemoteTensor] = []
        for i, out in enumerate(outputs):
            if not isinstance(out, RemoteTensor):
                where = f" on {out.device}" if out.device else ""
                self.flag(
                    CheatKind.LAZY_OUTPUT,
                    f"output {i} is a {out.type_name}{where}, not a plain torch.Tensor on the GPU",
                )
                self.stop_if_flagged()
            else:
                remotes.append(out)
        if len(remotes) != len(expected):
            failure = f"forward returned {len(remotes)} outputs, the reference {len(expected)}"
            return _Outcome(call, [], [], [failure], [], [], [])
        views = [self.link.tensor(r) for r in remotes]
        extents = [_extent(r) for r in remotes]
        before = [compare.fingerprint(v) for v in views]
        tols = tolerances or self.task_tolerances or [_Tolerance(self.config.atol, self.config.rtol)] * len(expected)
        comparisons = [
            compare.compare(i, v, e, t.atol, t.rtol, poison)
            for i, (v, e, t) in enumerate(zip(views, expected, tols, strict=True))
        ]
        after = [compare.fingerprint(v) for v in views]
        failures = [c.message for c in comparisons if not c.ok]
        for e, t in zip(expected, tols, strict=True):
            if e.is_floating_point():  # the tolerance applied, and the one before any widening
                applied = compare.tolerance(e.dtype, t.atol, t.rtol)[0]
                default = compare.tolerance(e.dtype, self.config.atol, self.config.rtol)[0]
                self.result.atol = max(self.result.atol or 0.0, applied)
                self.result.atol_default = max(self.result.atol_default or 0.0, default)
        for i, cmp in enumerate(comparisons):
            self.result.max_abs_error = max(self.result.max_abs_error or 0.0, cmp.max_abs)
            self.result.max_rel_error = max(self.result.max_rel_error or 0.0, cmp.max_rel)
            if cmp.survivors:
                self.flag(
                    CheatKind.UNWRITTEN_OUTPUT,
                    f"{when}: output {i}: {cmp.survivors} of {cmp.numel} elements never written "
                    f"(the {poison} marker survived)",
                )
            if cmp.constant and not cmp.ref_constant:
                self.flag(CheatKind.CONSTANT_OUTPUT, f"{when}: output {i} is constant while the reference's is not")
        if before != after:
            self.flag(CheatKind.SIDE_STREAM, f"{when}: the output kept changing after forward returned")
        for i, (master, buffer) in enumerate(current.pairs()):
            if not compare.bitwise_equal(master, buffer):
                self.flag(CheatKind.INPUT_MUTATION, f"{when}: forward modified input {i}")
        for i, extent in enumerate(extents):
            if _overlaps(extent, current.extents):
                self.flag(CheatKind.INPUT_ALIAS, f"{when}: output {i} shares storage with an input")
            if _overlaps(extent, (e for _, held in self.held for e in held)):
                self.flag(
                    CheatKind.PERSISTENT_OUTPUT,
                    f"{when}: output {i} is memory an earlier call returned and the caller still holds",
                )
        return _Outcome(call, views, extents, failures, comparisons, after, remotes)

    # -- timing ---------------------------------------------------------------------------
    def timed(self, reference: Reference, eager: Timing, compiled: Timing | None) -> None:
        self.stage = "the timed runs"
        cfg = self.config
        masters = [sets.task_inputs(reference.module, sets.secret_seed(), self.device)]
        masters += [
            sets.task_inputs(reference.module, sets.secret_seed(), self.device)
            for _ in range(1, timing_set_count(masters[0]))
        ]
        timing_sets = [self.send_set(f"t{i}", m) for i, m in enumerate(masters)]
        keys = [s.key for s in timing_sets]
        warm = self.request(Warmup(keys=keys, warmup=cfg.warmup), Warmed)
        self.health(warm.health, "warming up")
        self.stop_if_flagged()
        gate = timing.gate_ms(warm.host_ms)
        n = len(timing_sets)
        tail = set(range(max(0, cfg.trials - n), cfg.trials))  # the last output of each input set
        checked = tail | set(self.rng.sample(range(cfg.trials), min(cfg.timed_checks, cfg.trials)))
        recorded = (
            set(self.rng.sample(range(cfg.trials), min(RECORDED_TIMED, cfg.trials)))
            if self.job.fmt == "native"
            else set()
        )
        live: deque[list[tuple[int, int]]] = deque(maxlen=n)  # outputs the candidate's process holds
        trials, walls = [], []
        for i in range(cfg.trials):
            current = timing_sets[i % n]
            self._rewrite(reference, current)  # fresh in full before every trial, outside the timed region
            if i in recorded:
                expected = reference.forward(current.master)
                outcome = self.checked_call(current, expected, None, f"timed-phase call {i}", record=True)
                self.release(outcome)
                if not outcome.ok:
                    self.flag(
                        CheatKind.BEHAVIOUR_CHANGE,
                        f"an untimed call among the timed runs returned a wrong result: {outcome.failures[0]}",
                    )
                self._rewrite(reference, current)  # the trial must not see what the untimed call saw
            began = time.perf_counter()
            done = self.request(Trial(index=i, key=current.key, gate_ms=gate), TrialDone)
            walls.append((time.perf_counter() - began) * 1e3)
            if done.index != i:
                raise ProtocolViolation(f"a reply for trial {done.index} to trial {i}")
            trials.append(timing.Trial(None, done.ms, done.synced_ms, done.host_ms))
            extents = self._trial_outputs(i, done, current, reference if i in checked else None, live)
            live.append(extents)
        candidate = timing.summarize(trials, n, walls)
        self.result.candidate = candidate
        self._clock_checks(candidate, trials, walls, gate, warm.latency_ms)
        self.stop_if_flagged()
        self.result.reference_eager, self.result.reference_compile = eager, compiled
        self.result.speedup_eager = _speedup(eager, candidate)
        self.result.speedup_compile = _speedup(compiled, candidate)
        self._position(reference, candidate)

    def _trial_outputs(
        self,
        index: int,
        done: TrialDone,
        current: _CandidateSet,
        reference: Reference | None,
        live: deque[list[tuple[int, int]]],
    ) -> list[tuple[int, int]]:
        remotes = []
        for i, out in enumerate(done.outputs):
            if not isinstance(out, RemoteTensor):
                self.flag(CheatKind.LAZY_OUTPUT, f"timed run {index}: output {i} is a {out.type_name}")
                self.stop_if_flagged()
            else:
                remotes.append(out)
        extents = [_extent(r) for r in remotes]
        for i, extent in enumerate(extents):
            if _overlaps(extent, (e for held in live for e in held)):
                self.flag(
                    CheatKind.PERSISTENT_OUTPUT,
                    f"timed run {index}: output {i} is memory an earlier run returned and the caller still holds",
                )
            if _overlaps(extent, current.extents):
                self.flag(CheatKind.INPUT_ALIAS, f"timed run {index}: output {i} shares storage with an input")
        if reference is not None:
            assert self.link is not None
            expected = reference.forward(current.master)
            views = [self.link.tensor(r) for r in remotes]
            wrong = (
                [f"forward returned {len(views)} outputs, the reference {len(expected)}"]
                if len(views) != len(expected)
                else [
                    c.message
                    for i, (v, e) in enumerate(zip(views, expected, strict=True))
                    if not (c := compare.compare(i, v, e, *self._task_tolerance(i))).ok
                ]
            )
            if wrong:
                self.flag(
                    CheatKind.BEHAVIOUR_CHANGE,
                    f"timed run {index} returned a wrong result after the checked calls were right: {wrong[0]}",
                )
            for i, (master, buffer) in enumerate(current.pairs()):
                if not compare.bitwise_equal(master, buffer):
                    self.flag(CheatKind.INPUT_MUTATION, f"timed run {index}: forward modified input {i}")
            self.link.release(remotes)
        return extents

    def _clock_checks(
        self, candidate: Timing, trials: list[timing.Trial], walls: list[float], gate: float, latency_ms: float
    ) -> None:
        hidden = timing.hidden_work_ms(trials, latency_ms)
        if hidden > timing.hidden_work_tolerance(candidate):
            self.flag(
                CheatKind.SIDE_STREAM,
                f"timed runs: work went on {hidden:.3f} ms past the timed stream's end event "
                "(seen after a device-wide synchronize)",
            )
        unexplained = statistics.median(
            wall - self.judge.flush_ms - max(gate + t.ms, t.host_ms) for wall, t in zip(walls, trials, strict=True)
        )
        if unexplained > WALL_SLACK_MS + WALL_SLACK_SHARE * candidate.median_ms:
            self.flag(
                CheatKind.TIMER_PATCH,
                f"timed runs: the referee's clock saw {unexplained:.3f} ms per run more than the reported "
                f"{candidate.median_ms:.3f} ms explain (the events were not what they timed)",
            )

    def _position(self, reference: Reference, candidate: Timing) -> None:
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


def _float64_deviations(
    reference: Reference, drawn: list[Any], expected: list[torch.Tensor]
) -> list[tuple[float, float] | None]:
    """Per output, (max, norm) of |reference - float64 reference| on these inputs; None for
    an output that is not floating or has no float64 twin (too large, or no float64 kernel)."""
    exact = reference.forward64(drawn)
    return [
        compare.deviation(ref, exact[i])
        if exact is not None and i < len(exact) and ref.is_floating_point() and exact[i].shape == ref.shape
        else None
        for i, ref in enumerate(expected)
    ]


def _give_back(device: torch.device, needed: int) -> None:
    """empty_cache when the GPU has less than `needed` bytes free (see KEEP_CACHED_BYTES)."""
    if device.type == "cuda" and torch.cuda.mem_get_info(device)[0] < needed:
        torch.cuda.empty_cache()


def _nvcc(job: Job) -> str:
    try:
        return nvcc_version(job.build.nvcc)
    except UserError as exc:  # the versions are informative; a missing nvcc shows up at build time
        return f"unavailable ({exc})"


def _speedup(reference: Timing | None, candidate: Timing | None) -> float | None:
    if reference is None or candidate is None or candidate.cost_ms <= 0:
        return None
    return reference.cost_ms / candidate.cost_ms
