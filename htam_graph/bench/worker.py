"""One worker's share of a bench: streams of runs through the optimization loop, one run
after another, on the machine (or the GPU) the worker was given.

A run is started, resumed or skipped by what its folder holds (htam_graph/loop/runs.py):
finished (trajectory.json) is skipped, started (run.json) is resumed after its last
step, anything else starts afresh. A stream's memory is a SQLite file that is seeded
(or loaded from --memory-from) once, when it is created; the stream's lock keeps a
worker of an earlier, killed bench from running the same stream at the same time.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from htam_graph.bench.events import Event, RunFinished, RunStarted, StepFinished
from htam_graph.bench.plan import BenchManifest, Layout, RunSpec, Stream, exclusive
from htam_graph.errors import BadInput, UserError
from htam_graph.files import atomic_file, atomic_write
from htam_graph.llm.settings import LLMSettings
from htam_graph.loop.clients import make_client
from htam_graph.loop.evaluators import CandidateEvaluator, HoldsNothing, make_evaluator, sandbox_of
from htam_graph.loop.optimizer import load_steps
from htam_graph.loop.runs import open_run
from htam_graph.loop.setup import RunSetup
from htam_graph.memory.export_file import ExportFile, write_export
from htam_graph.memory.models import SECTIONS, MemorySnapshot
from htam_graph.memory.seed import load_seed_bank
from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.memory.store import MemoryStore
from htam_graph.runner.jobs import EvalConfig
from htam_graph.runner.models import EvalResult, Verdict
from htam_graph.tasks import Task

log = logging.getLogger(__name__)

Emit = Callable[[Event], None]
JUDGE_FAULT = "judge error"  # how a result of the judge's own failure begins (runner/referee/judge.py)


class BenchJob(BaseModel):
    """What any worker needs to run any stream of one bench."""

    model_config = ConfigDict(frozen=True)

    out: Path
    manifest: BenchManifest
    tasks: list[Task]
    llm: LLMSettings
    script: Path | None
    evaluator: str
    replay: Path | None = None  # the table or recording of --evaluator replay
    reuse: bool = True  # serve an identical candidate's earlier judgement (same task, same code) again

    def task(self, task_id: str) -> Task:
        return next(t for t in self.tasks if t.id == task_id)


def read_snapshot(path: Path) -> tuple[MemorySnapshot, str]:
    """An exported memory (`htam memory export`'s format, which a bench writes too; a bench's
    memory file of before, one JSON snapshot, is still read) and the sha256 of its file."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise BadInput(
            f"--memory-from {path}: {e.strerror}; give a file written by `htam memory export`",
            option="--memory-from",
            path=path,
        ) from None
    digest = hashlib.sha256(data).hexdigest()
    exported = ExportFile(path)
    try:
        exported.check()
    except UserError as refused:
        try:  # a bench's memory file as benches wrote them before the one format
            return MemorySnapshot.model_validate_json(data), digest
        except ValidationError:
            raise BadInput(f"--memory-from {refused}", option="--memory-from", path=path) from None
    sections: dict[str, list] = {section: [] for section in SECTIONS}
    for section, record in exported.items():
        sections[section].append(record)
    return MemorySnapshot.model_validate(sections), digest


def write_memory(store: MemoryStore, path: Path) -> None:
    """The store as `htam memory export` writes it, renamed into place once complete."""
    with atomic_file(path) as tmp, tmp.open("w", encoding="utf-8") as fh:
        write_export(store.export().items(), fh)


def content_digest(snapshot: MemorySnapshot) -> str:
    """The memory's sha256 without its timestamps (runs' started_at, steps' created_at): two
    trainings that learnt the same get the same digest, and so a bench from either, the same
    run ids and draws (BenchConfig.tag)."""
    dump = snapshot.model_dump_json(exclude={"runs": {"__all__": {"started_at"}}, "steps": {"__all__": {"created_at"}}})
    return hashlib.sha256(dump.encode()).hexdigest()


def memory_digest(digests: list[str]) -> str:
    """One digest of a --memory-from folder's exports."""
    return hashlib.sha256("\n".join(sorted(digests)).encode()).hexdigest()


def run_worker(job: BenchJob, name: str, next_stream: Callable[[], Stream | None], emit: Emit) -> None:
    """Run streams until `next_stream` has none left, with one evaluator for all of them."""
    bench = job.manifest.config
    config = EvalConfig(compile_reference=bench.compile_reference, sandbox=bench.sandbox)
    with make_evaluator(job.evaluator, config, job.replay) as evaluator:
        # a replay serves its recorded results already, and draws each run's timings anew
        reuse = job.reuse and job.evaluator != "replay"
        judge: CandidateEvaluator = Judgements(evaluator, Layout(job.out).judged, config) if reuse else evaluator
        while (stream := next_stream()) is not None:
            run_stream(job, stream, judge, name, emit)


class Judgements(HoldsNothing):
    """The evaluator, with every result kept under judged/ by (task, code, judge settings):
    a candidate a run writes that an earlier run of this bench wrote too (the catalog is
    deterministic, and seeds of a method often meet the same kernels) gets the earlier
    judgement again, marked `reused`, instead of a second turn on the GPU. Results whose
    verdict says the judge could not finish (timeout, a runtime error of the judge) are
    not kept. It holds nothing itself: whoever made the wrapped evaluator enters and leaves it."""

    def __init__(self, inner: CandidateEvaluator, folder: Path, config: EvalConfig) -> None:
        self.inner, self.folder = inner, folder
        self.label, self.device, self.target = inner.label, inner.device, inner.target
        self.sandbox = sandbox_of(inner)
        self._settings = hashlib.sha256(config.model_dump_json().encode()).hexdigest()

    def _path(self, task: Task, source: str) -> Path:
        key = f"{self.inner.label}\n{self._settings}\n{task.sha256}\n{hashlib.sha256(source.encode()).hexdigest()}"
        return self.folder / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"

    def evaluate(self, task: Task, source: str) -> EvalResult:
        path = self._path(task, source)
        try:
            earlier = EvalResult.model_validate_json(path.read_bytes())
        except (OSError, ValidationError):
            earlier = None
        if earlier is not None:
            log.info("%s: candidate %s judged earlier in this bench; reused", task.id, earlier.candidate_sha256[:12])
            return earlier.model_copy(update={"reused": True})
        result = self.inner.evaluate(task, source)
        if result.verdict != Verdict.TIMEOUT and not result.errors.startswith(JUDGE_FAULT):
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, result.model_dump_json())
        return result


def run_stream(job: BenchJob, stream: Stream, judge: CandidateEvaluator, worker: str, emit: Emit) -> None:
    """The stream's unfinished runs in order, then its memory exported next to it."""
    layout = Layout(job.out)
    lock = exclusive(layout.memory / f".{stream.name}.lock", f"stream {stream.name}", wait=True)
    with lock, _open_memory(job, layout.store(stream)) as store:
        for spec in stream.runs:
            if not layout.run_done(spec):
                _run(job, layout, spec, store, judge, worker, emit)
        write_memory(store, layout.export(stream))
    log.info("%s: stream %s done", worker, stream.name)


def _open_memory(job: BenchJob, path: Path) -> SQLiteStore:
    """The stream's store; a new one is seeded, or filled from --memory-from (one
    transaction either way, so an interrupted start leaves an empty store)."""
    store = SQLiteStore(path)
    if not any(store.counts().values()):
        source = job.manifest.config.memory_from
        if source is None:
            store.seed(load_seed_bank())
        else:
            folder = Path(source.path)
            export = folder / path.with_suffix(".json").name if folder.is_dir() else folder
            snapshot, sha256 = read_snapshot(export)
            if folder.is_dir():
                sha256 = memory_digest([read_snapshot(f)[1] for f in sorted(folder.glob("*.json"))])
            if sha256 != source.sha256:
                store.close()
                raise BadInput(
                    f"--memory-from {source.path} changed since the bench started; restore it",
                    option="--memory-from",
                    path=source.path,
                )
            store.import_snapshot(snapshot)
        log.info("memory %s: %s", path, store.counts())
    return store


def _run(
    job: BenchJob, layout: Layout, spec: RunSpec, store: MemoryStore, judge: CandidateEvaluator, worker: str, emit: Emit
) -> None:
    config = job.manifest.config
    task = job.task(spec.task_id)
    with make_client(job.llm, job.script) as client:
        setup = RunSetup(store=store, client=client, judge=judge)
        if layout.run_started(spec):
            run = open_run(layout.runs, spec.run_id, task)
        else:
            _remove_unstarted(layout.run(spec))
            run = setup.start(
                layout.runs, task, spec.method, spec.seed, config.steps, config.scoring, run_id=spec.run_id
            )
        optimizer = setup.optimizer(
            task,
            run,
            max_cost=config.max_cost,
            observe=lambda record, summary: emit(
                StepFinished(
                    worker=worker,
                    run_id=spec.run_id,
                    index=record.index,
                    verdict=record.verdict,
                    best_speedup=summary.best_speedup,
                )
            ),
        )
        done = len(load_steps(run[1]))
        emit(RunStarted(worker=worker, **spec.model_dump(), steps_done=done, steps_planned=optimizer.planned))
        summary = optimizer.run()
    emit(
        RunFinished(
            worker=worker,
            run_id=spec.run_id,
            task_id=spec.task_id,
            method=spec.method,
            seed=spec.seed,
            correct=summary.correct,
            best_speedup=summary.best_speedup,
            cost_usd=summary.usage.cost_usd,
        )
    )


def _remove_unstarted(folder: Path) -> None:
    """A folder create_run made but was killed before writing run.json into: at most a
    temporary file; it goes, so the run can be created."""
    if folder.is_dir():
        for leftover in folder.iterdir():
            log.info("removing %s, left by a run killed before it started", leftover)
            leftover.unlink()
        folder.rmdir()
