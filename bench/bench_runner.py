"""Benchmark of the runner on the built-in suite's honest native candidates (needs a GPU).

Measures: cold nvcc build time per candidate (empty cache; goal <= 1.5 s), warm (cached)
build time, evaluations per minute per GPU over the suite (goal >= 30), repeatability
(the suite evaluated --passes times: median difference of the candidate's median time
between the first and the last pass, and between consecutive passes; goal <= 2%),
and each task's speedup over eager PyTorch (and torch.compile with --compile-reference).
Prints a table and writes bench/results/runner-<date>-<gpu>.json.

    PYTHONPATH=. python3 bench/bench_runner.py [--trials 100] [--compile-reference] [--load-inline]
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
CANDIDATES = REPO / "bench" / "candidates"
LOAD_INLINE = REPO / "tests" / "runner" / "fixtures" / "relu_load_inline.py"


def honest_pairs() -> list[tuple[str, Path]]:
    """(task id, candidate file): bench/candidates/<level>/<task>.py answers <level>/<task>."""
    return [(f"{p.parent.name}/{p.stem}", p) for p in sorted(CANDIDATES.glob("level*/*.py"))]


def build_times(pairs: list[tuple[str, Path]], arch: str) -> dict[str, dict[str, float]]:
    """Cold then warm build of each candidate's CUDA_SRC, one at a time, in the current cache."""
    from htam_graph.runner.build import build_cubin
    from htam_graph.runner.formats import static_cuda_sources

    times = {}
    for task_id, path in pairs:
        sources = static_cuda_sources(path.read_text())
        cold = sum(build_cubin(src, arch).seconds for src in sources)
        warm = sum(build_cubin(src, arch).seconds for src in sources)
        times[task_id] = {"cold_s": cold, "warm_s": warm}
    return times


def parallel_build_seconds(pairs: list[tuple[str, Path]], arch: str) -> float:
    """Wall time of build_many over every candidate, in a fresh cache."""
    from htam_graph.runner.build import build_many
    from htam_graph.runner.formats import static_cuda_sources

    sources = [src for _, path in pairs for src in static_cuda_sources(path.read_text())]
    with tempfile.TemporaryDirectory() as cache:
        previous = os.environ.get("HTAM_CACHE_DIR")
        os.environ["HTAM_CACHE_DIR"] = cache
        try:
            started = time.perf_counter()
            build_many(sources, arch)
            return time.perf_counter() - started
        finally:
            if previous is None:
                os.environ.pop("HTAM_CACHE_DIR", None)
            else:
                os.environ["HTAM_CACHE_DIR"] = previous


def timed_suite(ev, pairs) -> tuple[list, float]:
    started = time.perf_counter()
    results = ev.evaluate_many([(task, path) for task, path in pairs], progress=False)
    return results, time.perf_counter() - started


def _median_diff(a: list, b: list) -> float | None:
    """Median relative difference of the candidates' median times between two passes."""
    diffs = [
        relative_diff(x.candidate and x.candidate.median_ms, y.candidate and y.candidate.median_ms)
        for x, y in zip(a, b, strict=True)
    ]
    diffs = [d for d in diffs if d is not None]
    return statistics.median(diffs) if diffs else None


def relative_diff(a: float | None, b: float | None) -> float | None:
    if not a or not b:
        return None
    return abs(a - b) / min(a, b)


@click.command()
@click.option("--trials", default=100, show_default=True, help="timed runs per candidate")
@click.option("--compile-reference", is_flag=True, help="also time torch.compile of each reference")
@click.option("--load-inline", is_flag=True, help="also evaluate one load_inline (KernelBench-format) candidate")
@click.option(
    "--passes",
    default=2,
    show_default=True,
    type=click.IntRange(min=2),
    help="suite passes; repeatability compares the first and the last",
)
@click.option("--out", type=click.Path(path_type=Path), default=REPO / "bench" / "results", show_default=True)
def main(trials: int, compile_reference: bool, load_inline: bool, passes: int, out: Path) -> None:
    from htam_graph.errors import UserError
    from htam_graph.runner.evaluate import Evaluator
    from htam_graph.tasks import resolve_task

    console = Console()
    cache = tempfile.mkdtemp(prefix="htam-bench-cache-")
    os.environ["HTAM_CACHE_DIR"] = cache  # every build below starts from an empty cache
    pairs = []
    for task_id, path in honest_pairs():
        try:
            pairs.append((resolve_task(task_id), path))
        except UserError as exc:  # a candidate whose task is not in the suite (yet)
            console.print(f"[yellow]skipped {path.name}: {exc}")
    ids = [(t.id, p) for t, p in pairs]
    with Evaluator(workers=1, trials=trials, compile_reference=compile_reference) as ev:
        info = ev.workers_info()[0]
        builds = build_times(ids, info.arch)
        parallel_s = parallel_build_seconds(ids, info.arch)
        runs = [timed_suite(ev, pairs) for _ in range(passes)]
        (first, first_s), (second, second_s) = runs[0], runs[-1]
        inline = None
        if load_inline:
            started = time.perf_counter()
            result = ev.evaluate(resolve_task("level1/19_ReLU"), LOAD_INLINE)
            inline = {
                "seconds": time.perf_counter() - started,
                "verdict": result.verdict.value,
                "speedup_eager": result.speedup_eager,
            }

    rows = []
    for (task, _), a, b in zip(pairs, first, second, strict=True):
        rows.append(
            {
                "task": task.id,
                "verdict": a.verdict.value,
                "verdict_again": b.verdict.value,
                "cold_build_s": builds[task.id]["cold_s"],
                "warm_build_s": builds[task.id]["warm_s"],
                "eval_s": a.eval_seconds,
                "max_abs_error": a.max_abs_error,
                "candidate_ms": a.candidate and a.candidate.median_ms,
                "candidate_ms_again": b.candidate and b.candidate.median_ms,
                "eager_ms": a.reference_eager and a.reference_eager.median_ms,
                "eager_ms_again": b.reference_eager and b.reference_eager.median_ms,
                "synced_ms": a.candidate and a.candidate.synced_median_ms,
                "host_ms": a.candidate and a.candidate.host_median_ms,
                "input_sets": a.candidate and a.candidate.input_sets,
                "compile_ms": a.reference_compile and a.reference_compile.median_ms,
                "speedup_eager": a.speedup_eager,
                "speedup_compile": a.speedup_compile,
                "repeat_diff": relative_diff(
                    a.candidate and a.candidate.median_ms, b.candidate and b.candidate.median_ms
                ),
                "errors": a.errors,
                "cheats": [f"{c.kind.value}: {c.detail}" for c in a.cheats],
            }
        )
    diffs = [r["repeat_diff"] for r in rows if r["repeat_diff"] is not None]
    eager_diffs = [d for r in rows if (d := relative_diff(r["eager_ms"], r["eager_ms_again"])) is not None]
    speedups = [r["speedup_eager"] for r in rows if r["speedup_eager"]]
    compile_speedups = [r["speedup_compile"] for r in rows if r["speedup_compile"]]
    summary = {
        "candidates": len(rows),
        "ok": sum(r["verdict"] == "ok" for r in rows),
        "cold_build_median_s": statistics.median(r["cold_build_s"] for r in rows),
        "cold_build_max_s": max(r["cold_build_s"] for r in rows),
        "warm_build_median_s": statistics.median(r["warm_build_s"] for r in rows),
        "parallel_cold_build_all_s": parallel_s,
        "evals_per_minute_per_gpu": len(rows) / first_s * 60,
        "evals_per_minute_per_gpu_last_pass": len(rows) / second_s * 60,
        "repeat_diff_median": statistics.median(diffs) if diffs else None,
        "repeat_diff_max": max(diffs) if diffs else None,
        "eager_repeat_diff_median": statistics.median(eager_diffs) if eager_diffs else None,
        "repeat_diff_median_by_pass_pair": [_median_diff(a, b) for (a, _), (b, _) in itertools.pairwise(runs)],
        "geomean_speedup_eager": statistics.geometric_mean(speedups) if speedups else None,
        "geomean_speedup_compile": statistics.geometric_mean(compile_speedups) if compile_speedups else None,
        "load_inline": inline,
    }
    report = {
        "date": dt.date.today().isoformat(),
        "gpu": info.device,
        "arch": info.arch,
        "versions": info.versions,
        "command": " ".join(["python3", *sys.argv]),
        "trials": trials,
        "summary": summary,
        "tasks": rows,
    }
    _print(console, rows, summary)
    out.mkdir(parents=True, exist_ok=True)
    gpu = info.device.split()[-1].lower()
    path = out / f"runner-{report['date']}-{gpu}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    console.print(f"wrote {path}")


def _print(console: Console, rows: list[dict], summary: dict) -> None:
    table = Table(
        "task",
        "verdict",
        "cold s",
        "warm ms",
        "eval s",
        "cand ms",
        "eager ms",
        "compile ms",
        "x eager",
        "x compile",
        "repeat",
    )
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
            fmt(r["compile_ms"], ".4f"),
            fmt(r["speedup_eager"], ".2f"),
            fmt(r["speedup_compile"], ".2f"),
            fmt(r["repeat_diff"] and r["repeat_diff"] * 100, ".2f") + "%",
        )
    console.print(table)
    console.print_json(json.dumps(summary))


if __name__ == "__main__":
    main()
