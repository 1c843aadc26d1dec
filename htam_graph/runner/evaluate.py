"""The runner's Python API: judge candidates against tasks on this machine's GPUs.

    with Evaluator(EvalConfig(trials=50)) as ev:
        result = ev.evaluate("level1/19_ReLU", Path("my_relu.py"))
        print(Feedback.of(result))

One referee process per GPU judges its jobs one at a time, each candidate in a fresh
process of its own (docs/judge.md). `evaluate_many` builds the native candidates' CUDA
ahead, in parallel across the CPU cores, while the referees judge, so the cubin cache is
warm when a candidate loads.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from htam_graph.errors import BadInput, CandidateError
from htam_graph.runner import sandbox
from htam_graph.runner.build import BuildSettings, build_cubin, gpu_arch
from htam_graph.runner.builder import candidate_readable
from htam_graph.runner.formats import candidate_problem, detect_format, static_cuda_sources
from htam_graph.runner.jobs import EvalConfig, Job, RefereeInfo
from htam_graph.runner.models import BuildResult, EvalResult, Verdict
from htam_graph.runner.pool import Referee, RefereeGone, visible_gpu_count
from htam_graph.runner.static_checks import static_check
from htam_graph.tasks import Task, resolve_task, task_dtype

logger = logging.getLogger(__name__)

TaskLike = Task | str | Path
CandidateLike = str | Path
Progress = Callable[[EvalResult], None]


class Evaluator:
    """A referee per GPU; use as a context manager so the processes are stopped."""

    def __init__(
        self, config: EvalConfig | None = None, workers: int | None = None, build: BuildSettings | None = None
    ) -> None:
        """`workers`: referees (one per GPU by default); `build`: nvcc, cache and arch,
        resolved from the settings (flags, HTAM_* environment, the settings file) when not given."""
        self.config = config or EvalConfig()
        if self.config.sandbox:
            sandbox.require()  # asked for, so no generated code runs unconfined
        visible = visible_gpu_count()  # fails early and clearly on a machine without a GPU
        if not self.config.sandbox:
            logger.warning("unconfined (%s): %s", sandbox.NO_SANDBOX_FLAG, sandbox.UNCONFINED)
        self.worker_count = workers or visible
        self.build = (build or BuildSettings.resolve()).model_copy(update={"sandbox": self.config.sandbox})
        self._referees: list[Referee] = []

    def __enter__(self) -> Evaluator:
        readable = None
        if self.config.sandbox:
            folders = candidate_readable(self.build.cache_dir)
            for folder in folders:  # Landlock grants only folders that exist when the process confines
                folder.mkdir(parents=True, exist_ok=True)
            readable = [str(f) for f in folders]
        self._referees = [Referee(i, self.config.startup_timeout_s, readable) for i in range(self.worker_count)]
        return self

    def __exit__(self, *exc: object) -> None:
        for referee in self._referees:
            referee.stop()
        self._referees = []

    def workers_info(self) -> list[RefereeInfo]:
        """Each referee's device, arch and versions (waits until they are up)."""
        return [referee.info() for referee in self._referees]

    def evaluate(self, task: TaskLike, candidate: CandidateLike) -> EvalResult:
        return self.evaluate_many([(task, candidate)])[0]

    def evaluate_many(
        self,
        pairs: Iterable[tuple[TaskLike, CandidateLike]],
        progress: Progress | None = None,
        config: EvalConfig | None = None,
    ) -> list[EvalResult]:
        """Results in the order of `pairs`; a failure of one candidate never stops the rest.
        `progress` is called with each result as it arrives (from a worker thread). `config`:
        another one than the evaluator's for these jobs (e.g. reference_only)."""
        if not self._referees:
            raise BadInput("Evaluator is not started; use it as `with Evaluator() as ev:`")
        build = self.build.for_arch(self._referees[0].info().arch)
        jobs = [make_job(task, candidate, config or self.config, build) for task, candidate in pairs]
        results: list[EvalResult | None] = [None] * len(jobs)
        todo: queue.Queue[int] = queue.Queue()
        for index in range(len(jobs)):
            todo.put(index)
        failed: list[BaseException] = []
        with ThreadPoolExecutor() as builder:
            builds = [_prebuild(builder, job) for job in jobs]

            def serve(referee: Referee) -> None:
                try:
                    while not failed:
                        try:
                            index = todo.get_nowait()
                        except queue.Empty:
                            return
                        for future in builds[index]:
                            future.result()
                        result = reverified(referee, jobs[index], _run(referee, jobs[index]))
                        results[index] = result
                        if progress is not None:
                            progress(result)
                except BaseException as exc:  # e.g. a referee that cannot start: stop all, re-raise below
                    failed.append(exc)

            threads = [threading.Thread(target=serve, args=(r,), daemon=True) for r in self._referees]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        if failed:
            raise failed[0]
        return [r for r in results if r is not None]


def _prebuild(builder: ThreadPoolExecutor, job: Job) -> list[Future[BuildResult]]:
    if job.fmt != "native":
        return []
    return [builder.submit(build_cubin, src, job.build) for src in static_cuda_sources(job.candidate_source)]


def reverified(referee: Referee, job: Job, first: EvalResult) -> EvalResult:
    """A suspicious ok result judged once more, in a fresh candidate process (sandboxed,
    unless --no-sandbox) on inputs drawn from fresh secret seeds. It stands only if the
    second judgement is ok too; then with the smaller of the two speedups, and verified."""
    if first.verdict != Verdict.OK or not first.suspicious:
        return first
    logger.info("suspicious result on %s (%s): judging it again", job.task.id, first.suspicious_reason)
    second = _run(referee, job)
    if second.verdict != Verdict.OK:
        errors = f"a suspicious result ({first.suspicious_reason}) did not hold when judged again: {second.errors}"
        return second.model_copy(update={"errors": errors, "suspicious": True, "verified": False})
    slower = min((first, second), key=lambda r: r.speedup_eager or 0.0)
    return slower.model_copy(update={"verified": True})


def _run(referee: Referee, job: Job) -> EvalResult:
    info = referee.info()
    try:
        return referee.run(job, job.config.referee_timeout(job.fmt))
    except RefereeGone as gone:
        return EvalResult(
            task_id=job.task.id,
            task_sha256=job.task.sha256,
            candidate_sha256=job.candidate_sha256,
            candidate_format=job.fmt,
            verdict=Verdict.TIMEOUT if gone.timed_out else Verdict.RUNTIME_ERROR,
            errors=gone.detail,
            device=info.device,
            versions=info.versions,
            sandboxed=job.build.sandbox,
        )


def make_job(task: TaskLike, candidate: CandidateLike, config: EvalConfig, build: BuildSettings) -> Job:
    task = task if isinstance(task, Task) else resolve_task(task)
    source, path = _read_candidate(candidate)
    return Job(
        task=task,
        candidate_source=source,
        candidate_path=path,
        candidate_sha256=hashlib.sha256(source.encode("utf-8")).hexdigest(),
        fmt=detect_format(source),
        config=config,
        build=build,
    )


def precheck(task: TaskLike, candidate: CandidateLike, build: BuildSettings | None = None) -> EvalResult:
    """What can be judged without a GPU: the static checks and, for the native format, the
    nvcc build of its CUDA_SRC strings. Verdict CHECKED when both pass (nothing was run)."""
    build = build or BuildSettings.resolve()
    job = make_job(task, candidate, EvalConfig(), build.for_arch(build.arch or gpu_arch()))
    result = EvalResult(
        task_id=job.task.id,
        task_sha256=job.task.sha256,
        candidate_sha256=job.candidate_sha256,
        candidate_format=job.fmt,
        verdict=Verdict.CHECKED,
        sandboxed=build.sandbox,
    )
    if problem := candidate_problem(job.candidate_source):  # what loading it would report
        return result.model_copy(update={"verdict": Verdict.LOAD_ERROR, "errors": problem})
    dtype = str(task_dtype(job.task.load_module())).removeprefix("torch.")
    if found := static_check(job.candidate_source, dtype, job.fmt):
        errors = "; ".join(f.detail for f in found)
        return result.model_copy(update={"verdict": Verdict.REJECTED, "cheats": found, "errors": errors})
    if job.fmt != "native":
        return result  # load_inline builds only when the candidate loads, on the GPU machine
    if build.sandbox:
        sandbox.require()
    builds = [build_cubin(src, job.build) for src in static_cuda_sources(job.candidate_source)]
    seconds = sum(b.seconds for b in builds)
    if failed := [b for b in builds if not b.ok]:
        update = {"verdict": Verdict.COMPILE_ERROR, "errors": failed[0].errors, "build_seconds": seconds}
        return result.model_copy(update=update)
    return result.model_copy(update={"compiled": bool(builds), "build_seconds": seconds})


def _read_candidate(candidate: CandidateLike) -> tuple[str, str | None]:
    """(source, path): a Path, or a str that is source (has a newline) or names a file."""
    if isinstance(candidate, str) and "\n" in candidate:
        return candidate, None
    path = Path(candidate)
    if not path.is_file():
        raise CandidateError(f"{path}: no such candidate file; give a .py file defining ModelNew", path=path)
    return path.read_text(encoding="utf-8"), str(path.resolve())
