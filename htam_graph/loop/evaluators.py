"""Who judges the loop's candidates: the GPU runner, a stand-in where there is no GPU, or a
replay of results recorded on a GPU.

Every evaluator has a `label` that every output of a run shows, so a number that did
not come from a GPU is never mistaken for one.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import re
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Literal, Protocol, Self

from pydantic import BaseModel, Field, ValidationError

from htam_graph.errors import BadInput
from htam_graph.files import atomic_write
from htam_graph.runner import sandbox
from htam_graph.runner.build import DEFAULT_ARCH, BuildSettings, gpu_arch
from htam_graph.runner.evaluate import Evaluator, Progress, precheck
from htam_graph.runner.hardware import build_facts, nvcc_of, unmeasured
from htam_graph.runner.jobs import EvalConfig
from htam_graph.runner.models import EvalResult, HardwareFacts, Timing, Verdict
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
        self.sandbox = self._evaluator.config.sandbox
        self.device = self.target = "GPU"
        self.hardware: HardwareFacts | None = None

    def __enter__(self) -> Self:
        self._evaluator.__enter__()
        info = self._evaluator.workers_info()[0]
        self.device = f"{info.device} ({info.arch})"
        self.target = f"an {self.device}"
        build = self._evaluator.build.for_arch(info.arch)
        arch = build.arch or info.arch
        facts = info.hardware or unmeasured(self.device, arch, None, gpu=info.device)
        self.hardware = facts.model_copy(update=build_facts(arch, nvcc_of(build)))  # the build this judge runs
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._evaluator.__exit__(exc_type, exc, tb)

    def evaluate(self, task: Task, source: str) -> EvalResult:
        return self._evaluator.evaluate(task, source)

    def evaluate_many(self, pairs: list[tuple[Task, str]], progress: Progress | None = None) -> list[EvalResult]:
        """Several candidates, built ahead in parallel while the GPU judges (runner.Evaluator)."""
        return self._evaluator.evaluate_many(pairs, progress)

    def reference(self, task: Task) -> EvalResult:
        """The reference's timings and roofline alone (a reference_only job: no candidate)."""
        config = self._evaluator.config.model_copy(update={"reference_only": True})
        return self._evaluator.evaluate_many([(task, REFERENCE_ONLY)], config=config)[0]


# The candidate of a reference_only job (never loaded) and its replay key.
REFERENCE_ONLY = "# the reference's timings only: no candidate\n"

STAND_IN_DEVICE = (
    "stand-in evaluator (no GPU): static checks and nvcc builds are real, ok verdicts and times are synthetic"
)


class HoldsNothing:
    """An evaluator without processes or a device to hold: entering and leaving do nothing."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None


class StandInEvaluator(HoldsNothing):
    """Stands in for the GPU where there is none (CI, a laptop): the static cheat checks
    and the nvcc build are the runner's own; a candidate that passes both is called `ok`
    with a synthetic time derived from its content hash (eager 1.0 ms, candidate 0.5-2.0
    ms), so the loop, the memory and resumption can be exercised end to end. Every result
    says so in its `device`. Its nvcc builds run confined when `config.sandbox` says so."""

    label = "stand-in"
    device = STAND_IN_DEVICE

    def __init__(self, config: EvalConfig | None = None) -> None:
        self.sandbox = (config or EvalConfig()).sandbox
        if self.sandbox:
            sandbox.require()
        # its builds are real: a machine without nvcc is told so (find_nvcc) before a run starts
        self._build = BuildSettings.resolve().model_copy(update={"sandbox": self.sandbox})
        self.target = f"an NVIDIA GPU of architecture {gpu_arch()}"
        self.hardware = unmeasured(STAND_IN_DEVICE, gpu_arch(), nvcc_of(self._build))

    def evaluate(self, task: Task, source: str) -> EvalResult:
        result = precheck(task, source, self._build)
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

    def reference(self, task: Task) -> EvalResult:
        """The synthetic eager time every stand-in result carries (1.0 ms)."""
        return EvalResult(
            task_id=task.id, task_sha256=task.sha256, candidate_sha256=_sha(REFERENCE_ONLY),
            candidate_format="native", verdict=Verdict.CHECKED, reference_eager=_timing(1.0), device=STAND_IN_DEVICE,
            sandboxed=self.sandbox,
        )  # fmt: skip


def _sha(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def _timing(ms: float) -> Timing:
    return Timing(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, trials=1)


REPLAY_FORMAT = "htam-replay/1"


class Recording(BaseModel):
    """A replay file: the runner's results for (task, candidate) pairs, recorded on a GPU."""

    format: Literal["htam-replay/1"] = "htam-replay/1"
    device: str = Field(description="the GPU that judged, e.g. NVIDIA H200 (sm_90)")
    target: str = Field(description="the GPU as the prompts named it")
    hardware: HardwareFacts | None = Field(None, description="the judging GPU's facts (None in older recordings)")
    recorded_at: datetime
    command: str = Field(description="the command that recorded it")
    results: dict[str, EvalResult] = Field(description="by replay_key(task, candidate)")


def replay_key(task: Task, source: str) -> str:
    """A result is replayed only for the same task file and the same candidate, byte for byte."""
    return f"{task.id}|{task.sha256}|{hashlib.sha256(source.encode()).hexdigest()}"


def load_recording(path: Path) -> Recording:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise BadInput(
            f"replay file {path}: {e.strerror}; record one on a GPU machine with `htam demo --record {path}`",
            option="--replay",
            path=path,
        ) from None
    try:
        text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        return Recording.model_validate_json(text)
    except (ValidationError, OSError, EOFError) as e:
        raise BadInput(
            f"replay file {path} is not an {REPLAY_FORMAT} file ({str(e).splitlines()[0]})",
            option="--replay",
            path=path,
        ) from None


def save_recording(path: Path, recording: Recording) -> None:
    """Write atomically; gzip when the name ends in .gz."""
    data = recording.model_dump_json(indent=None).encode()
    if path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    atomic_write(path, data)


class ReplayEvaluator(HoldsNothing):
    """Serves results a GPU recorded (`htam demo --record FILE`), by task and candidate
    hash: the whole loop runs for real on a machine without a GPU, and every result it
    uses is one the GPU judge produced. A candidate that was not recorded is an error."""

    label = "replay"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.recording = load_recording(path)
        when = self.recording.recorded_at.date().isoformat()
        self.device = f"replay of {self.recording.device} results recorded {when} ({path.name})"
        self.target = self.recording.target
        recorded = self.recording.hardware
        self.hardware = (
            recorded.model_copy(update={"judged_by": self.device})
            if recorded is not None
            else unmeasured(self.device, arch_of(self.recording.device), None, gpu=self.recording.device)
        )

    def evaluate(self, task: Task, source: str) -> EvalResult:
        key = replay_key(task, source)
        result = self.recording.results.get(key)
        if result is None:
            raise BadInput(
                f"{self.path} holds no recorded result for {task.id}, candidate {key.rsplit('|', 1)[1][:12]} "
                f"(a different task file, method, seed or catalog version than recorded); record it on a GPU "
                f"machine with `htam demo --record {self.path}` and the same options",
                option="--replay",
                value=task.id,
                path=self.path,
            )
        return result.model_copy(update={"device": self.device})

    def reference(self, task: Task) -> EvalResult | None:
        """The recorded reference-only result, else the reference timing any recorded result
        of this task file carries (the judge times the reference once per task)."""
        found = self.recording.results.get(replay_key(task, REFERENCE_ONLY))
        if found is None:
            prefix = f"{task.id}|{task.sha256}|"
            found = next(
                (r for k, r in sorted(self.recording.results.items()) if k.startswith(prefix) and r.reference_eager),
                None,
            )
        return None if found is None else found.model_copy(update={"device": self.device})


class RecordingEvaluator:
    """An evaluator (the GPU judge) keeping every result it gives, for a replay file
    written when it closes without an error."""

    def __init__(self, path: Path, command: str, inner: CandidateEvaluator) -> None:
        self.path, self.command, self._inner = path, command, inner
        self.label, self.sandbox = inner.label, sandbox_of(inner)
        self.device, self.target = inner.device, inner.target
        self.hardware = hardware_of(inner)
        self.results: dict[str, EvalResult] = {}

    def __enter__(self) -> Self:
        self._inner.__enter__()
        self.device, self.target = self._inner.device, self._inner.target
        self.hardware = hardware_of(self._inner)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._inner.__exit__(exc_type, exc, tb)
        if exc_type is None:
            recording = Recording(
                device=self.device, target=self.target, hardware=self.hardware,
                recorded_at=datetime.now().astimezone(), command=self.command, results=self.results,
            )  # fmt: skip
            save_recording(self.path, recording)
            log.info("recorded %d results in %s", len(self.results), self.path)

    def evaluate(self, task: Task, source: str) -> EvalResult:
        result = self._inner.evaluate(task, source)
        self.results[replay_key(task, source)] = result
        return result

    def reference(self, task: Task) -> EvalResult | None:
        result = reference_of(self._inner, task)
        if result is not None:
            self.results[replay_key(task, REFERENCE_ONLY)] = result
        return result


def reference_of(evaluator: object, task: Task) -> EvalResult | None:
    """The reference's timings from the evaluator, where it can give them (`reference`):
    step 1's prompt states the time to beat (issue 34, item 5)."""
    reference = getattr(evaluator, "reference", None)
    return reference(task) if callable(reference) else None


def hardware_of(evaluator: object) -> HardwareFacts:
    """The facts of the machine that judges, as every method's prompt states them (issue 34,
    item 4): the evaluator's own, else (an evaluator that keeps none, e.g. a test's) what its
    `device` says, with the build of this machine and nothing measured."""
    facts = getattr(evaluator, "hardware", None)
    if isinstance(facts, HardwareFacts):
        return facts
    device = str(getattr(evaluator, "device", "an unnamed evaluator"))
    return unmeasured(device, arch_of(device), None)


def sandbox_of(evaluator: object) -> bool | None:
    """Whether the evaluator runs generated code confined (--sandbox); None: it runs none
    (a replay serves results judged elsewhere, each saying how: EvalResult.sandboxed)."""
    confined = getattr(evaluator, "sandbox", None)
    return confined if isinstance(confined, bool) else None


def arch_of(device: str) -> str:
    """sm_XY named in a device string ("NVIDIA H200 (sm_90)"), else the build's default."""
    match = re.search(r"\bsm_\d+a?\b", device)
    return match.group(0) if match else DEFAULT_ARCH


def for_run(evaluator: CandidateEvaluator, run_id: str) -> CandidateEvaluator:
    """The evaluator one run uses: a table's replay draws its timings by the run's id."""
    scoped = getattr(evaluator, "for_run", None)
    return scoped(run_id) if callable(scoped) else evaluator


def make_evaluator(kind: str, config: EvalConfig | None = None, replay: Path | None = None) -> CandidateEvaluator:
    """`gpu`, `stand-in` or `replay` (of the file `replay`: a table `htam catalog record` wrote,
    *.parquet, or a recording of runs); the CLI validates the name."""
    if kind == "stand-in":
        return StandInEvaluator(config)
    if kind == "replay":
        if replay is None:
            raise BadInput("--evaluator replay needs a replay file (--replay FILE)", option="--replay")
        if replay.suffix == ".parquet":
            from htam_graph.loop.table import TableEvaluator  # it builds on this module's evaluators

            return TableEvaluator(replay)
        return ReplayEvaluator(replay)
    return GpuEvaluator(config)
