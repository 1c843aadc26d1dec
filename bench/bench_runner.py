"""Benchmark of the runner on the built-in suite's honest native candidates (needs a GPU).

Measures: cold nvcc build time per candidate (empty cache; goal <= 1.5 s), warm (cached)
build time, evaluations per minute per GPU over the suite (goal >= 60), repeatability
(the suite evaluated --passes times: median difference of the candidate's median time
between the first and the last pass, and between consecutive passes; goal <= 2%), the
cost of a fresh process per candidate (fork to CUDA ready, and how long a job waited for
it), and each task's speedup over eager PyTorch (and torch.compile with --compile-reference).

With --kernelbench DIR (a KernelBench checkout's KernelBench folder, or a copy of some of
its level<N> files): every task there is prepared the way the referee prepares it (model,
all input sets and probes, the float64 reference, reference timing, the comparison) and
its time and peak GPU memory recorded; the tasks that have an honest candidate (under
tests/runner/kernelbench/, or a suite candidate for the same operator) are judged in full.

With --profile: afterwards a fresh referee judges the suite twice under cProfile, with its
candidate processes, and the top functions (own and cumulative time) of the referee and of
the candidates (summed) go to profile-<date>-<gpu>.txt: where each side's share of a job
goes, beside the per-stage medians of the summary.

Prints tables and writes bench/results/runner-<date>-<gpu>.json.

    PYTHONPATH=. python3 bench/bench_runner.py [--trials 100] [--passes 3] [--kernelbench DIR] [--profile]
"""

from __future__ import annotations

import datetime as dt
import io
import itertools
import json
import statistics
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from htam_graph.runner.build import BuildSettings, build_cubin, build_many
from htam_graph.runner.evaluate import Evaluator
from htam_graph.runner.formats import static_cuda_sources
from htam_graph.runner.jobs import EvalConfig
from htam_graph.runner.models import EvalResult
from htam_graph.runner.sandbox import ON_BY_DEFAULT
from htam_graph.tasks import Task, load_tasks, resolve_task

REPO = Path(__file__).resolve().parents[1]
CANDIDATES = REPO / "bench" / "candidates"
KERNELBENCH_CANDIDATES = REPO / "tests" / "runner" / "kernelbench"
LOAD_INLINE = REPO / "tests" / "runner" / "fixtures" / "relu_load_inline.py"
# KernelBench tasks a suite candidate answers as written (same operator and constructor).
SUITE_ANSWERS = {
    "level1/23_Softmax": "level1/7_Softmax",
    "level1/40_LayerNorm": "level1/9_LayerNorm",
    "level1/47_Sum_reduction_over_a_dimension": "level1/4_Sum_reduction_dim",
}


def honest_pairs() -> list[tuple[Task, Path]]:
    """(task, candidate file): bench/candidates/<level>/<task>.py answers <level>/<task>."""
    return [(resolve_task(f"{p.parent.name}/{p.stem}"), p) for p in sorted(CANDIDATES.glob("level*/*.py"))]


def build_times(pairs: list[tuple[Task, Path]], settings: BuildSettings) -> dict[str, dict[str, float]]:
    """Cold then warm build of each candidate's CUDA_SRC, one at a time, in `settings`' cache."""
    times = {}
    for task, path in pairs:
        sources = static_cuda_sources(path.read_text())
        cold = sum(build_cubin(src, settings).seconds for src in sources)
        warm = sum(build_cubin(src, settings).seconds for src in sources)
        times[task.id] = {"cold_s": cold, "warm_s": warm}
    return times


def parallel_build_seconds(pairs: list[tuple[Task, Path]], settings: BuildSettings) -> float:
    """Wall time of build_many over every candidate, in a fresh cache."""
    sources = [src for _, path in pairs for src in static_cuda_sources(path.read_text())]
    with tempfile.TemporaryDirectory() as cache:
        started = time.perf_counter()
        build_many(sources, settings.model_copy(update={"cache_dir": Path(cache)}))
        return time.perf_counter() - started


def timed_suite(ev: Evaluator, pairs: list[tuple[Task, Path]]) -> tuple[list[EvalResult], float]:
    started = time.perf_counter()
    results = ev.evaluate_many(pairs)
    return results, time.perf_counter() - started


def relative_diff(a: float | None, b: float | None) -> float | None:
    if not a or not b:
        return None
    return abs(a - b) / min(a, b)


def _median_diff(a: list[EvalResult], b: list[EvalResult]) -> float | None:
    """Median relative difference of the candidates' median times between two passes."""
    diffs = [
        relative_diff(x.candidate and x.candidate.median_ms, y.candidate and y.candidate.median_ms)
        for x, y in zip(a, b, strict=True)
    ]
    found = [d for d in diffs if d is not None]
    return statistics.median(found) if found else None


def _median(values: list[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return statistics.median(found) if found else None


def _row(task: Task, a: EvalResult, b: EvalResult, builds: dict[str, dict[str, float]]) -> dict[str, Any]:
    return {
        "task": task.id,
        "verdict": a.verdict.value,
        "verdict_again": b.verdict.value,
        "cold_build_s": builds[task.id]["cold_s"],
        "warm_build_s": builds[task.id]["warm_s"],
        "eval_s": a.eval_seconds,
        "eval_s_again": b.eval_seconds,
        "process_start_s": a.process_start_seconds,
        "process_wait_s": b.process_wait_seconds,
        "max_abs_error": a.max_abs_error,
        "candidate_ms": a.candidate and a.candidate.median_ms,
        "candidate_ms_again": b.candidate and b.candidate.median_ms,
        "eager_ms": a.reference_eager and a.reference_eager.median_ms,
        "eager_ms_again": b.reference_eager and b.reference_eager.median_ms,
        "synced_ms": a.candidate and a.candidate.synced_median_ms,
        "host_ms": a.candidate and a.candidate.host_median_ms,
        "wall_ms": a.candidate and a.candidate.wall_median_ms,
        "input_sets": a.candidate and a.candidate.input_sets,
        "compile_ms": a.reference_compile and a.reference_compile.median_ms,
        "speedup_eager": a.speedup_eager,
        "speedup_compile": a.speedup_compile,
        "bandwidth_fraction": a.roofline and a.roofline.bandwidth_fraction,
        "compute_fraction": a.roofline and a.roofline.compute_fraction,
        "floor_ms": a.roofline and a.roofline.floor_ms,
        "repeat_diff": relative_diff(a.candidate and a.candidate.median_ms, b.candidate and b.candidate.median_ms),
        "probes_skipped": [p.name for p in a.probes if p.outcome == "skipped"],
        "errors": a.errors,
        "cheats": [f"{c.kind.value}: {c.detail}" for c in a.cheats],
    }


def suite_report(ev: Evaluator, passes: int, settings: BuildSettings) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    pairs = honest_pairs()
    builds = build_times(pairs, settings)
    parallel_s = parallel_build_seconds(pairs, settings)
    runs = [timed_suite(ev, pairs) for _ in range(passes)]
    (first, first_s), (last, last_s) = runs[0], runs[-1]
    rows = [_row(task, a, b, builds) for (task, _), a, b in zip(pairs, first, last, strict=True)]
    diffs = [r["repeat_diff"] for r in rows if r["repeat_diff"] is not None]
    eager_diffs = [d for r in rows if (d := relative_diff(r["eager_ms"], r["eager_ms_again"])) is not None]
    speedups = [r["speedup_eager"] for r in rows if r["speedup_eager"]]
    compile_speedups = [r["speedup_compile"] for r in rows if r["speedup_compile"]]
    every = [result for results, _ in runs for result in results]
    summary = {
        "candidates": len(rows),
        "ok": sum(r["verdict"] == "ok" for r in rows),
        "ok_every_pass": sum(all(results[i].verdict.value == "ok" for results, _ in runs) for i in range(len(rows))),
        "cold_build_median_s": statistics.median(r["cold_build_s"] for r in rows),
        "cold_build_max_s": max(r["cold_build_s"] for r in rows),
        "warm_build_median_s": statistics.median(r["warm_build_s"] for r in rows),
        "parallel_cold_build_all_s": parallel_s,
        "evals_per_minute_per_gpu": len(rows) / first_s * 60,
        "evals_per_minute_per_gpu_last_pass": len(rows) / last_s * 60,
        "evals_per_minute_per_gpu_by_pass": [len(rows) / s * 60 for _, s in runs],
        "eval_s_median": _median([r.eval_seconds for r in every]),
        "process_start_s_median": _median([r.process_start_seconds for r in every]),
        "process_start_s_max": max((r.process_start_seconds or 0.0) for r in every),
        "process_wait_s_median": _median([r.process_wait_seconds for r in every]),
        "process_wait_s_max": max((r.process_wait_seconds or 0.0) for r in every),
        "repeat_diff_median": statistics.median(diffs) if diffs else None,
        "repeat_diff_max": max(diffs) if diffs else None,
        "eager_repeat_diff_median": statistics.median(eager_diffs) if eager_diffs else None,
        "repeat_diff_median_by_pass_pair": [_median_diff(a, b) for (a, _), (b, _) in itertools.pairwise(runs)],
        "geomean_speedup_eager": statistics.geometric_mean(speedups) if speedups else None,
        "geomean_speedup_compile": statistics.geometric_mean(compile_speedups) if compile_speedups else None,
        # Where a job's time goes on the referee's clock (runner/referee/judge.py stages), the
        # last pass's median per stage; `candidate:*` is the candidate process's share.
        "stage_s_median_last_pass": {
            stage: statistics.median(r.stage_seconds.get(stage, 0.0) for r in last)
            for stage in sorted({k for r in last for k in r.stage_seconds})
        },
        # Where a candidate process's start went (its own clock, fork to CUDA ready).
        "process_start_stage_s_median": {
            stage: statistics.median(r.process_start_stages.get(stage, 0.0) for r in every)
            for stage in sorted({k for r in every for k in r.process_start_stages})
        },
    }
    return rows, summary


def kernelbench_candidate(task: Task, candidates: Path | None) -> Path | None:
    """The honest candidate judged for a KernelBench task: one written for it here, a suite
    candidate for the same operator, else one under `candidates` (e.g. the strategy catalog's,
    from bench/bench_catalog_coverage.py --write-candidates)."""
    own = KERNELBENCH_CANDIDATES / f"{task.id}.py"
    if own.is_file():
        return own
    suite = SUITE_ANSWERS.get(task.id)
    if suite:
        return CANDIDATES / f"{suite}.py"
    if candidates is not None and (candidates / f"{task.id}.py").is_file():
        return candidates / f"{task.id}.py"
    return None


def prepare_like_the_referee(task: Task, config: EvalConfig, gate: Any) -> dict[str, Any]:
    """Everything the referee does for a task but run a candidate: the reference and its
    timing (behind `gate`, a timing.Gate), every input set and probe, the float64 reference,
    the comparison; with the time and the peak GPU memory it took (the referee's side only).
    Its memory is given back to the GPU afterwards, for the candidate judged next."""
    import gc

    import torch

    device = torch.device("cuda", 0)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    record: dict[str, Any] = {"task": task.id}
    try:
        record.update(_prepare(task, config, gate, device))
    except Exception as exc:
        record.update(ok=False, error=f"{type(exc).__name__}: {exc}", trace=traceback.format_exc()[-2000:])
    record["seconds"] = time.perf_counter() - started
    record["peak_gpu_gb"] = torch.cuda.max_memory_allocated(device) / 1e9
    gc.collect()
    torch.cuda.empty_cache()
    return record


def _prepare(task: Task, config: EvalConfig, gate: Any, device: Any) -> dict[str, Any]:
    import torch

    from htam_graph.runner import compare
    from htam_graph.runner.referee import inputs as sets
    from htam_graph.runner.referee.reference import References
    from htam_graph.runner.timing import L2Flusher

    refs = References(device, L2Flusher())
    reference = refs.prepare(task, config)
    eager, _ = refs.timings(reference, config, gate)
    skipped, float64 = [], True
    recipes = sets.plan(config.correctness_trials, True, reference.dtype == torch.float32, config.seed)
    for index, recipe in enumerate(recipes):
        drawn = sets.generate(reference.module, recipe, device)
        expected = reference.forward(drawn)
        if recipe.kind != sets.InputKind.TASK or index == 0:  # the first task set: the task's conditioning
            if not all(bool(torch.isfinite(t).all()) for t in expected):
                skipped.append(recipe.name)
                continue
            exact = reference.forward64(drawn)
            float64 = float64 and exact is not None
            for ref, ref64 in zip(expected, exact or [], strict=False):
                compare.deviation(ref, ref64)
            del exact
        for i, ref in enumerate(expected):
            assert compare.compare(i, ref, ref).ok
        del drawn, expected
    return {
        "ok": True,
        "input_gb": reference.input_bytes / 1e9,
        "output_gb": reference.output_bytes / 1e9,
        "flops": reference.flops,
        "eager_ms": eager.median_ms,
        "probes_skipped": skipped,
        "float64_reference": float64,
    }


def kernelbench_report(
    ev: Evaluator,
    root: Path,
    candidates: Path | None,
    earlier: dict[str, Any] | None,
    settings: BuildSettings,
    save: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    """Each task prepared, then judged when it has a candidate; `save` gets the report so far
    after each task (a run cut short by its time limit keeps what it measured, and `earlier`,
    such a report, is continued: its successful preparations and `ok` verdicts are kept, the
    rest redone)."""
    from htam_graph.runner.timing import Gate

    tasks = load_tasks(root)
    gate = Gate.build(settings)
    report: dict[str, Any] = {"root": str(root), "prepared": [], "judged": []}
    if earlier:
        report["prepared"] = [row for row in earlier.get("prepared", []) if row["ok"]]
        report["judged"] = [row for row in earlier.get("judged", []) if row["verdict"] == "ok"]
    prepared_ok = {row["task"] for row in report["prepared"]}
    judged_ok = {row["task"] for row in report["judged"]}
    for i, task in enumerate(tasks, 1):
        candidate = kernelbench_candidate(task, candidates)
        if task.id in prepared_ok and (candidate is None or task.id in judged_ok):
            continue
        line = f"[{i}/{len(tasks)}] {task.id}:"
        if task.id not in prepared_ok:
            prepared = prepare_like_the_referee(task, EvalConfig(trials=10, warmup=2), gate)
            report["prepared"].append(prepared)
            line += f" prepared {'ok' if prepared['ok'] else 'FAILED'} in {prepared['seconds']:.1f} s"
        if candidate is not None and task.id not in judged_ok:
            result = ev.evaluate(task, candidate)
            report["judged"].append(
                {
                    "task": task.id,
                    "candidate": str(candidate.relative_to(REPO)) if candidate.is_relative_to(REPO) else str(candidate),
                    "verdict": result.verdict.value,
                    "errors": result.errors,
                    "cheats": [f"{c.kind.value}: {c.detail}" for c in result.cheats],
                    "eval_s": result.eval_seconds,
                    "stage_s": result.stage_seconds,
                    "candidate_ms": result.candidate and result.candidate.median_ms,
                    "eager_ms": result.reference_eager and result.reference_eager.median_ms,
                    "speedup_eager": result.speedup_eager,
                    "bytes_moved_gb": result.roofline and result.roofline.bytes_moved / 1e9,
                    "bandwidth_fraction": result.roofline and result.roofline.bandwidth_fraction,
                    "probes": [f"{p.name}:{p.outcome}" for p in result.probes],
                }
            )
            line += f" judged {result.verdict.value} in {result.eval_seconds:.1f} s"
            if result.speedup_eager:
                line += f", {result.speedup_eager:.2f}x eager"
        print(line, flush=True)
        save(report)
    return report


@click.command()
@click.option("--trials", default=EvalConfig().trials, show_default=True, help="timed runs per candidate")
@click.option("--compile-reference", is_flag=True, help="also time torch.compile of each reference")
@click.option("--load-inline", is_flag=True, help="also evaluate one load_inline (KernelBench-format) candidate")
@click.option(
    "--passes",
    default=3,
    show_default=True,
    type=click.IntRange(min=0),
    help="suite passes (0: skip the suite); repeatability compares the first and the last",
)
@click.option(
    "--kernelbench",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="a KernelBench checkout's KernelBench folder (or level folders' copies): prepare every task as the "
    "referee does, and judge those with a candidate",
)
@click.option(
    "--candidates",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="with --kernelbench: candidates for tasks that have none here, as DIR/<level>/<task>.py",
)
@click.option(
    "--resume",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="with --kernelbench: continue an earlier run's JSON (its successful preparations and ok verdicts are "
    "kept, the rest redone)",
)
@click.option(
    "--profile",
    is_flag=True,
    help="then judge the suite twice more (the first warms the references) with a fresh referee under cProfile "
    "and write its and its candidate processes' top functions (profile-<date>-<gpu>.txt beside the JSON); the "
    "measured passes run unprofiled",
)
@click.option(
    "--sandbox/--no-sandbox",
    default=ON_BY_DEFAULT,
    show_default=True,
    help="candidates and builds confined (the sandbox's cost: compare with and without)",
)
@click.option("--out", type=click.Path(path_type=Path), default=REPO / "bench" / "results", show_default=True)
def main(
    trials: int,
    compile_reference: bool,
    load_inline: bool,
    passes: int,
    kernelbench: Path | None,
    candidates: Path | None,
    resume: Path | None,
    profile: bool,
    sandbox: bool,
    out: Path,
) -> None:
    console = Console()
    cache = Path(tempfile.mkdtemp(prefix="htam-bench-cache-"))
    # every build starts cold; builds confined as the Evaluator's are, unless --no-sandbox
    settings = BuildSettings.resolve().model_copy(update={"cache_dir": cache, "sandbox": sandbox})
    config = EvalConfig(trials=trials, compile_reference=compile_reference, sandbox=sandbox)
    report: dict[str, Any] = {
        "date": dt.date.today().isoformat(),
        "command": " ".join(["python3", *sys.argv]),
        "sandbox": sandbox,
    }
    out.mkdir(parents=True, exist_ok=True)

    def save(section: str | None = None, value: Any = None) -> None:
        if section is not None:
            report[section] = value
        gpu = str(report.get("gpu", "gpu")).split()[-1].lower()
        path = out / f"runner-{report['date']}-{gpu}.json"
        path.write_text(json.dumps(report, indent=2, default=str) + "\n")

    with Evaluator(config, workers=1, build=settings) as ev:
        info = ev.workers_info()[0]
        report.update(gpu=info.device, arch=info.arch, versions=info.versions, trials=trials)
        settings = settings.for_arch(info.arch)
        if passes:
            rows, summary = suite_report(ev, max(passes, 2), settings)
            report.update(summary=summary, tasks=rows)
            save()
            _print(console, rows, summary)
        if load_inline:
            started = time.perf_counter()
            result = ev.evaluate(resolve_task("level1/19_ReLU"), LOAD_INLINE)
            inline = {"seconds": time.perf_counter() - started, "verdict": result.verdict.value}
            save("load_inline", {**inline, "speedup_eager": result.speedup_eager})
        if kernelbench is not None:
            earlier = json.loads(resume.read_text()).get("kernelbench") if resume is not None else None
            found = kernelbench_report(
                ev, kernelbench, candidates, earlier, settings, lambda part: save("kernelbench", part)
            )
            _print_kernelbench(console, found)
    save()
    if profile:
        gpu = str(report.get("gpu", "gpu")).split()[-1].lower()
        text = profiled_pass(config, settings)
        (out / f"profile-{report['date']}-{gpu}.txt").write_text(text)
        console.print(text[:6000])
    console.print(f"wrote {out}")


def _print_kernelbench(console: Console, found: dict[str, Any]) -> None:
    prepared = found["prepared"]
    table = Table(title=f"KernelBench tasks under {found['root']}")
    for column in ("", "tasks", "ok", "failed", "peak GPU GiB (max)", "seconds (max)"):
        table.add_column(column)
    failed = [p for p in prepared if not p["ok"]]
    table.add_row(
        "prepared as the referee does",
        str(len(prepared)),
        str(len(prepared) - len(failed)),
        str(len(failed)),
        f"{max((p['peak_gpu_gb'] for p in prepared), default=0) / 1.073741824:.1f}",
        f"{max((p['seconds'] for p in prepared), default=0):.1f}",
    )
    verdicts = Counter(j["verdict"] for j in found["judged"])
    table.add_row(
        "judged with a candidate",
        str(len(found["judged"])),
        str(verdicts.get("ok", 0)),
        ", ".join(f"{v} {n}" for v, n in sorted(verdicts.items()) if v != "ok") or "0",
        "",
        f"{max((j['eval_s'] or 0 for j in found['judged']), default=0):.1f}",
    )
    console.print(table)
    for p in failed:
        console.print(f"prepare failed: {p['task']}: {p['error']}", highlight=False)
    for j in found["judged"]:
        if j["verdict"] != "ok":
            console.print(f"judged {j['verdict']}: {j['task']}: {(j['errors'] or j['cheats'])[:2]}", highlight=False)


def profiled_pass(config: EvalConfig, settings: BuildSettings) -> str:
    """Two passes of the suite with a fresh referee under cProfile (runner/referee/main.py,
    HTAM_PROFILE_DIR), its candidate processes too (each writes its stats on Finish): where
    the referee's and the candidates' time goes, by function, as pstats prints it (sorted by
    own time, then cumulative; the candidates' stats summed over all of them). The passes'
    times are printed too; they are slower than unprofiled passes."""
    import os
    import pstats

    from htam_graph.runner.referee.main import PROFILE_ENV

    pairs = honest_pairs()
    with tempfile.TemporaryDirectory() as folder:
        os.environ[PROFILE_ENV] = folder
        try:
            with Evaluator(config, workers=1, build=settings) as ev:
                ev.workers_info()
                seconds, results = [], []
                for _ in range(2):  # the first pass prepares references and warms caches
                    started = time.perf_counter()
                    results = ev.evaluate_many(pairs)
                    seconds.append(time.perf_counter() - started)
        finally:
            del os.environ[PROFILE_ENV]
        buffer = io.StringIO()
        buffer.write(
            f"two profiled passes of {len(pairs)} candidates: {seconds[0]:.1f} s and {seconds[1]:.1f} s "
            f"({sum(r.verdict.value == 'ok' for r in results)} ok in the second)\n"
        )
        for path in sorted(Path(folder).glob("referee-*.prof")):
            stats = pstats.Stats(str(path), stream=buffer)
            stats.sort_stats("tottime").print_stats(40)
            stats.sort_stats("cumulative").print_stats(60)
        candidates = sorted(str(p) for p in Path(folder).glob("candidate-*.prof"))
        if candidates:
            buffer.write(f"\n=== the {len(candidates)} candidate processes that finished, summed\n")
            stats = pstats.Stats(*candidates, stream=buffer)
            stats.sort_stats("tottime").print_stats(40)
            stats.sort_stats("cumulative").print_stats(60)
    return buffer.getvalue()


def _print(console: Console, rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    table = Table("task", "verdict", "cold s", "warm ms", "eval s", "cand ms", "eager ms", "x eager", "bw", "repeat")
    fmt = lambda v, spec: "" if v is None else format(v, spec)
    for r in rows:
        table.add_row(
            r["task"],
            r["verdict"],
            fmt(r["cold_build_s"], ".2f"),
            fmt(r["warm_build_s"] * 1e3, ".1f"),
            fmt(r["eval_s"], ".2f"),
            fmt(r["candidate_ms"], ".4f"),
            fmt(r["eager_ms"], ".4f"),
            fmt(r["speedup_eager"], ".2f"),
            fmt(r["bandwidth_fraction"], ".0%"),
            fmt(r["repeat_diff"] and r["repeat_diff"] * 100, ".2f") + "%",
        )
    console.print(table)
    console.print_json(json.dumps(summary))


if __name__ == "__main__":
    main()
