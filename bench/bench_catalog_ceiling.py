"""The strategy catalog's ceiling per task, judged on a GPU: is the gap to torch.compile in
the kernel templates, or in the 6 steps a method takes through them?

For each task: the base kernel, every implemented strategy applied alone to it, every
strategy of the family's order applied in turn ("all"), and a greedy search: from the
best kernel so far, every strategy applied once more, for `--rounds` rounds. Identical
kernels are judged once. Every kernel goes through the real judge (correctness, checks and
timing; the eager reference timed in the same judge); torch.compile's time is read from a
committed suite bench (`--compile-from`, its runs.csv), since timing it here would add
its compile time per task.

    python3 bench/bench_catalog_ceiling.py [--tasks level1/20_Cumsum,...] [--rounds 1] \\
        [--compile-from bench/results/bench-2026-12-01-h200-suite2/results/runs.csv] [--out DIR]

Prints a table (per task: the base kernel, the best single strategy, the best found, its
knobs, and the best over eager and over torch.compile) and writes
catalog-ceiling-<date>-<gpu>.json with every judged kernel.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from htam_graph.catalog.families import Recognition, recognize  # noqa: E402
from htam_graph.catalog.ir import Unsupported  # noqa: E402
from htam_graph.catalog.knobs import Knobs  # noqa: E402
from htam_graph.catalog.render import Header, render_candidate  # noqa: E402
from htam_graph.catalog.strategies import STRATEGIES  # noqa: E402
from htam_graph.catalog.variants import everything, singles  # noqa: E402
from htam_graph.runner.evaluate import Evaluator  # noqa: E402
from htam_graph.runner.jobs import EvalConfig  # noqa: E402
from htam_graph.runner.models import EvalResult  # noqa: E402
from htam_graph.tasks import Task, builtin_suite_dir, load_tasks  # noqa: E402

HEADER = Header("catalog-v1", "the catalog ceiling bench", [], [], [])
DEFAULT_COMPILE = REPO / "bench/results/bench-2026-12-01-h200-suite2/results/runs.csv"


def _render(rec: Recognition, knobs: Knobs) -> str:
    return render_candidate(rec, knobs, HEADER)


def _key(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def compile_times(path: Path) -> dict[str, float]:
    """Median torch.compile time per task in a suite bench's runs.csv."""
    if not path.exists():
        return {}
    times: dict[str, list[float]] = {}
    with path.open() as f:
        for row in csv.DictReader(f):
            if row.get("compile_ms"):
                times.setdefault(row["task_id"], []).append(float(row["compile_ms"]))
    return {task: statistics.median(v) for task, v in times.items()}


class Search:
    """One task's kernels: knobs by code, and their judged results."""

    def __init__(self, task: Task, rec: Recognition, ev: Evaluator) -> None:
        self.task, self.rec, self.ev = task, rec, ev
        self.kernels: dict[str, dict[str, Any]] = {}  # code hash -> row

    def judge(self, labelled: list[tuple[str, Knobs]]) -> None:
        fresh: dict[str, tuple[str, Knobs, str]] = {}
        for label, knobs in labelled:
            try:
                source = _render(self.rec, knobs)
            except Unsupported:
                continue
            key = _key(source)
            if key not in self.kernels and key not in fresh:
                fresh[key] = (label, knobs, source)
        results: list[EvalResult] = self.ev.evaluate_many([(self.task, source) for _, _, source in fresh.values()])
        for (key, (label, knobs, _)), result in zip(fresh.items(), results, strict=True):
            ok = result.verdict.value == "ok"
            self.kernels[key] = {
                "label": label,
                "knobs": knobs.changed(),
                "verdict": result.verdict.value,
                "ms": result.candidate.median_ms if ok and result.candidate else None,
                "eager_ms": result.reference_eager.median_ms if result.reference_eager else None,
                "speedup_eager": result.speedup_eager if ok else None,
                "errors": (result.errors or "")[:300],
            }

    def best(self, labels: tuple[str, ...] | None = None) -> dict[str, Any] | None:
        rows = [r for r in self.kernels.values() if r["speedup_eager"] and (labels is None or r["label"] in labels)]
        return max(rows, key=lambda r: r["speedup_eager"], default=None)

    def run(self, rounds: int) -> None:
        base = Knobs()
        self.judge([("base", base), *singles(self.rec).items(), ("all", everything(self.rec))])
        for r in range(rounds):
            best = self.best()
            if best is None:
                return
            tries = singles(self.rec, Knobs(**best["knobs"]))
            before = len(self.kernels)
            self.judge(
                [(f"{best['label']} + {sid}" if r == 0 else f"round {r + 1}: {sid}", k) for sid, k in tries.items()]
            )
            if len(self.kernels) == before:
                return


@click.command()
@click.option("--tasks", default="", help="comma-separated task ids of the built-in suite (default: all supported)")
@click.option("--rounds", default=1, show_default=True, help="greedy rounds after the single strategies")
@click.option(
    "--compile-from",
    type=click.Path(path_type=Path),
    default=DEFAULT_COMPILE,
    show_default=True,
    help="a suite bench's runs.csv with torch.compile times per task",
)
@click.option("--out", type=click.Path(path_type=Path), default=REPO / "bench" / "results", show_default=True)
def main(tasks: str, rounds: int, compile_from: Path, out: Path) -> None:
    console = Console()
    wanted = [t for t in tasks.split(",") if t]
    suite = {t.id: t for t in load_tasks(builtin_suite_dir())}
    unknown = [t for t in wanted if t not in suite]
    if unknown:
        raise click.BadParameter(f"not in the built-in suite: {', '.join(unknown)}", param_hint="--tasks")
    compiled = compile_times(compile_from)
    rows: list[dict[str, Any]] = []
    with Evaluator(EvalConfig(), workers=1) as ev:
        info = ev.workers_info()[0]
        for task_id in wanted or sorted(suite):
            task = suite[task_id]
            try:
                rec = recognize(task.source)
            except Unsupported as e:
                console.print(f"{task_id}: no catalog kernel ({e})")
                continue
            search = Search(task, rec, ev)
            search.run(rounds)
            best, base = search.best(), search.best(("base",))
            single = search.best(tuple(STRATEGIES))
            compile_ms = compiled.get(task_id)
            row = {
                "task": task_id,
                "family": rec.family.value,
                "kernels": len(search.kernels),
                "ok": sum(r["verdict"] == "ok" for r in search.kernels.values()),
                "base": base["speedup_eager"] if base else None,
                "best_single": single["speedup_eager"] if single else None,
                "best": best["speedup_eager"] if best else None,
                "best_label": best["label"] if best else None,
                "best_knobs": best["knobs"] if best else None,
                "best_ms": best["ms"] if best else None,
                "eager_ms": best["eager_ms"] if best else None,
                "compile_ms": compile_ms,
                "best_vs_compile": compile_ms / best["ms"] if best and compile_ms and best["ms"] else None,
                "all_kernels": list(search.kernels.values()),
            }
            rows.append(row)
            _write(out, info, rows, compile_from, rounds)  # after every task: a cut-short run keeps what it did
            console.print(
                f"{task_id}: {row['kernels']} kernels, best {row['best']}x eager "
                f"({row['best_vs_compile']}x torch.compile) with {row['best_knobs']}"
            )
    _table(console, rows)
    path = _write(out, info, rows, compile_from, rounds)
    console.print(f"wrote {path}")


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ratios = [r["best_vs_compile"] for r in rows if r["best_vs_compile"]]
    bests = [r["best"] for r in rows if r["best"]]
    return {
        "tasks": len(rows),
        "geomean_best_vs_eager": math.exp(statistics.fmean(math.log(x) for x in bests)) if bests else None,
        "geomean_best_vs_compile": math.exp(statistics.fmean(math.log(x) for x in ratios)) if ratios else None,
    }


def _table(console: Console, rows: list[dict[str, Any]]) -> None:
    table = Table("task", "ok/kernels", "base", "best single", "best", "vs torch.compile", "best knobs")
    fmt = lambda v: "" if v is None else f"{v:.2f}x"
    for r in rows:
        table.add_row(
            r["task"],
            f"{r['ok']}/{r['kernels']}",
            fmt(r["base"]),
            fmt(r["best_single"]),
            fmt(r["best"]),
            fmt(r["best_vs_compile"]),
            json.dumps(r["best_knobs"]),
        )
    console.print(table)
    console.print(_summary(rows))


def _write(out: Path, info: Any, rows: list[dict[str, Any]], compile_from: Path, rounds: int) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    date = dt.date.today().isoformat()
    report = {
        "date": date,
        "command": " ".join(sys.argv),
        "gpu": info.device,
        "versions": info.versions,
        "compile_from": str(compile_from),
        "rounds": rounds,
        "summary": _summary(rows),
        "tasks": rows,
    }
    path = out / f"catalog-ceiling-{date}-{info.device.split()[-1].lower()}.json"
    path.write_text(json.dumps(report, indent=2, default=str))
    return path


if __name__ == "__main__":
    main()
