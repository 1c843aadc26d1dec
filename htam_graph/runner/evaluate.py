"""The runner's Python API: judge candidates against tasks in isolated GPU workers.

    with Evaluator() as ev:
        result = ev.evaluate("level1/19_ReLU", Path("my_relu.py"))
        print(to_feedback(result))

`evaluate_many` builds the native candidates' CUDA ahead, in parallel across the CPU
cores, while the workers (one per GPU) evaluate, so the cubin cache is warm when a
worker loads a candidate.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from htam_graph.errors import UserError
from htam_graph.runner.build import build_cubin
from htam_graph.runner.formats import detect_format, static_cuda_sources
from htam_graph.runner.jobs import EvalConfig, Job, WorkerInfo
from htam_graph.runner.models import EvalResult, Verdict
from htam_graph.runner.pool import Worker, WorkerGone, visible_gpu_count
from htam_graph.tasks import Task, resolve_task

TaskLike = Task | str | Path
CandidateLike = str | Path


class Evaluator:
    """A pool of GPU workers; use as a context manager so the workers are stopped."""

    def __init__(
        self,
        workers: int | None = None,
        timeout_s: float = 120.0,
        compile_reference: bool = False,
        spare: bool = True,
        **options: Any,
    ) -> None:
        """`workers`: one per GPU by default; `spare`: keep a started replacement per GPU
        (for batches; a single evaluation does not need it); `options`: EvalConfig fields."""
        self.config = EvalConfig(timeout_s=timeout_s, compile_reference=compile_reference, **options)
        visible = visible_gpu_count()  # fails early and clearly on a machine without a GPU
        self.worker_count = workers or visible
        self.spare = spare
        self._workers: list[Worker] = []

    def __enter__(self) -> Evaluator:
        self._workers = [Worker(i, self.config.startup_timeout_s, self.spare) for i in range(self.worker_count)]
        return self

    def __exit__(self, *exc: object) -> None:
        for worker in self._workers:
            worker.stop()
        self._workers = []

    def workers_info(self) -> list[WorkerInfo]:
        """Each worker's device, arch and versions (waits until the workers are up)."""
        return [worker.info() for worker in self._workers]

    def evaluate(self, task: TaskLike, candidate: CandidateLike) -> EvalResult:
        return self.evaluate_many([(task, candidate)], progress=False)[0]

    def evaluate_many(self, pairs: Iterable[tuple[TaskLike, CandidateLike]], progress: bool = True) -> list[EvalResult]:
        """Results in the order of `pairs`; a failure of one candidate never stops the rest."""
        if not self._workers:
            raise UserError("Evaluator is not started; use it as `with Evaluator() as ev:`")
        jobs = [self._job(task, candidate) for task, candidate in pairs]
        arch = self._workers[0].info().arch
        results: list[EvalResult | None] = [None] * len(jobs)
        todo: queue.Queue[int] = queue.Queue()
        for index in range(len(jobs)):
            todo.put(index)
        with ThreadPoolExecutor() as builder, _Progress(len(jobs), progress) as bar:
            builds = [self._prebuild(builder, job, arch) for job in jobs]

            failed: list[BaseException] = []

            def serve(worker: Worker) -> None:
                try:
                    while not failed:
                        try:
                            index = todo.get_nowait()
                        except queue.Empty:
                            return
                        for build in builds[index]:
                            build.result()
                        results[index] = self._run(worker, jobs[index])
                        bar.advance(results[index])
                except BaseException as exc:  # e.g. a worker that cannot start: stop all, re-raise below
                    failed.append(exc)

            threads = [threading.Thread(target=serve, args=(w,), daemon=True) for w in self._workers]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        if failed:
            raise failed[0]
        return [r for r in results if r is not None]

    def _job(self, task: TaskLike, candidate: CandidateLike) -> Job:
        return make_job(task, candidate, self.config)

    @staticmethod
    def _prebuild(builder: ThreadPoolExecutor, job: Job, arch: str) -> list[Future[Any]]:
        if job.fmt != "native":
            return []
        return [builder.submit(build_cubin, src, arch) for src in static_cuda_sources(job.candidate_source)]

    def _run(self, worker: Worker, job: Job) -> EvalResult:
        info = worker.info()
        try:
            return worker.run(job, self.config.job_timeout(job.fmt)).result
        except WorkerGone as gone:
            return EvalResult(
                task_id=job.task.id,
                task_sha256=job.task.sha256,
                candidate_sha256=job.candidate_sha256,
                candidate_format=job.fmt,
                verdict=Verdict.TIMEOUT if gone.timed_out else Verdict.RUNTIME_ERROR,
                errors=gone.detail,
                device=info.device,
                versions=info.versions,
            )


def make_job(task: TaskLike, candidate: CandidateLike, config: EvalConfig) -> Job:
    task = task if isinstance(task, Task) else resolve_task(task)
    source, path = _read_candidate(candidate)
    return Job(
        task=task,
        candidate_source=source,
        candidate_path=path,
        candidate_sha256=hashlib.sha256(source.encode("utf-8")).hexdigest(),
        fmt=detect_format(source),
        config=config,
    )


def precheck(task: TaskLike, candidate: CandidateLike, arch: str | None = None) -> EvalResult:
    """What can be judged without a GPU: the static checks and, for the native format, the
    nvcc build of its CUDA_SRC strings. Verdict CHECKED when both pass (nothing was run)."""
    from htam_graph.runner.build import device_arch
    from htam_graph.runner.static_checks import static_check
    from htam_graph.tasks import task_dtype

    job = make_job(task, candidate, EvalConfig())
    result = EvalResult(
        task_id=job.task.id,
        task_sha256=job.task.sha256,
        candidate_sha256=job.candidate_sha256,
        candidate_format=job.fmt,
        verdict=Verdict.CHECKED,
    )
    dtype = str(task_dtype(job.task.load_module())).removeprefix("torch.")
    if found := static_check(job.candidate_source, dtype, job.fmt):
        return result.model_copy(
            update={
                "verdict": Verdict.REJECTED,
                "cheats": found,
                "errors": "; ".join(f.detail for f in found),
            }
        )
    if job.fmt != "native":
        return result  # load_inline builds only when the candidate loads, on the GPU machine
    builds = [build_cubin(src, arch or device_arch()) for src in static_cuda_sources(job.candidate_source)]
    update: dict[str, Any] = {"build_seconds": sum(b.seconds for b in builds)}
    if failed := [b for b in builds if not b.ok]:
        update.update(verdict=Verdict.COMPILE_ERROR, errors=failed[0].errors)
    else:
        update["compiled"] = bool(builds)
    return result.model_copy(update=update)


def _read_candidate(candidate: CandidateLike) -> tuple[str, str | None]:
    """(source, path): a Path, or a str that is source (has a newline) or names a file."""
    if isinstance(candidate, str) and "\n" in candidate:
        return candidate, None
    path = Path(candidate)
    if not path.is_file():
        raise UserError(f"{path}: no such candidate file; give a .py file defining ModelNew")
    return path.read_text(encoding="utf-8"), str(path.resolve())


class _Progress:
    """A rich progress bar that counts verdicts; silent when off."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.enabled = total, enabled
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.progress import Progress

            self._bar = Progress(*Progress.get_default_columns(), "{task.fields[verdicts]}", transient=False)
            self._bar.start()
            self._task = self._bar.add_task("evaluating", total=self.total, verdicts="")
        return self

    def advance(self, result: EvalResult) -> None:
        if not self.enabled:
            return
        with self._lock:
            self.counts[result.verdict.value] = self.counts.get(result.verdict.value, 0) + 1
            text = " ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))
            self._bar.update(self._task, advance=1, verdicts=text)

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._bar.stop()


def to_feedback(result: EvalResult) -> dict[str, Any]:
    """A compact, LLM-ready summary of one evaluation (absent values left out)."""
    ms = lambda t: round(t.median_ms, 4) if t else None
    feedback: dict[str, Any] = {
        "verdict": result.verdict.value,
        "errors": result.errors or None,
        "cheats": [f"{c.kind.value}: {c.detail}" for c in result.cheats] or None,
        "max_abs_error": result.max_abs_error,
        "max_rel_error": result.max_rel_error,
        "candidate_ms": ms(result.candidate),
        # Only when the CPU side of forward costs more than its GPU work: then that is what to cut.
        "candidate_host_ms": (
            round(result.candidate.host_median_ms, 4)
            if result.candidate and (result.candidate.host_median_ms or 0.0) > result.candidate.median_ms
            else None
        ),
        "eager_ms": ms(result.reference_eager),
        "compile_ms": ms(result.reference_compile),
        "speedup_eager": round(result.speedup_eager, 3) if result.speedup_eager else None,
        "speedup_compile": round(result.speedup_compile, 3) if result.speedup_compile else None,
        "suspicious": result.suspicious or None,
    }
    return {k: v for k, v in feedback.items() if v is not None}


def results_table(results: Sequence[EvalResult]) -> Any:
    """A rich table of verdicts, errors and speedups (the CLI and benchmarks print it)."""
    from rich.table import Table

    table = Table("task", "verdict", "max abs err", "cand ms", "eager ms", "compile ms", "x eager", "x compile")
    fmt = lambda v, spec: "" if v is None else format(v, spec)
    for r in results:
        table.add_row(
            r.task_id,
            r.verdict.value,
            fmt(r.max_abs_error, ".2e"),
            fmt(r.candidate and r.candidate.median_ms, ".4f"),
            fmt(r.reference_eager and r.reference_eager.median_ms, ".4f"),
            fmt(r.reference_compile and r.reference_compile.median_ms, ".4f"),
            fmt(r.speedup_eager, ".2f"),
            fmt(r.speedup_compile, ".2f"),
        )
    return table
