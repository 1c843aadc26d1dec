"""The strategy catalog on the built-in suite (or a KernelBench checkout) with the real judge.

For each method (default: htam, feedback, htam-no-prefix; same seed, same steps), a fresh
seeded memory and `htam optimize --llm catalog --steps N` on every task in suite order,
through the same Python API the command uses (one GPU judge for the whole benchmark; the
memory carries over from task to task, as in a real suite run). Then torch.compile of
every task's reference is timed on the same GPU, in the same benchmark, against the best
kernel each method found. Reported per task and overall: correctness (a correct final
best kernel), fast_1 (correct and faster than eager), geomean speedup over eager and over
torch.compile (a task without a correct kernel keeps the reference: 1.0 over eager,
eager/compile over torch.compile), on all tasks and on the tasks whose family the catalog
supports.

Work is saved after every task: `--resume FILE` continues a partial result (methods and
compile timings already in it are kept), so the benchmark can be split over several calls
of a time-limited machine. `--evaluator stand-in` smoke-tests it without a GPU (synthetic
times; never a result to quote).

    PYTHONPATH=. python bench/bench_catalog.py [--methods htam,feedback,htam-no-prefix]
        [--steps 6] [--seed 0] [--tasks PATTERN] [--root KERNELBENCH_DIR] [--no-compile]
        [--evaluator gpu|stand-in] [--json PATH] [--resume PATH]
"""

from __future__ import annotations

import datetime as dt
import json
import math
import platform
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from htam_graph import __version__
from htam_graph.catalog.client import CATALOG_MODEL, CatalogClient
from htam_graph.catalog.families import recognize
from htam_graph.catalog.ir import Unsupported
from htam_graph.config import ScoringParams
from htam_graph.loop.evaluators import CandidateEvaluator, GpuEvaluator, StandInEvaluator
from htam_graph.loop.optimizer import Optimizer
from htam_graph.loop.runs import create_run, task_context
from htam_graph.memory.models import RunConfig
from htam_graph.memory.seed import load_seed_bank
from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.runner.jobs import EvalConfig
from htam_graph.runner.models import Verdict
from htam_graph.tasks import Task, builtin_suite_dir, load_tasks
from htam_graph.vocab import Method

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
console = Console()


def _evaluator(kind: str, config: EvalConfig) -> CandidateEvaluator:
    return StandInEvaluator() if kind == "stand-in" else GpuEvaluator(config)


def _family(task: Task) -> tuple[str, bool, str]:
    try:
        rec = recognize(task.source)
    except Unsupported as e:
        return "unsupported", False, str(e)
    return rec.family.value, True, ""


def run_method(
    method: Method, tasks: list[Task], steps: int, seed: int, judge: CandidateEvaluator, work: Path, save: Any
) -> dict[str, Any]:
    """Every task in order with one fresh memory; returns per-task records."""
    records: dict[str, Any] = {}
    client = CatalogClient()
    with SQLiteStore(work / f"memory-{method.value}.sqlite") as store:
        store.seed(load_seed_bank())
        for task in tasks:
            started = time.perf_counter()
            manifest, folder = create_run(
                out=work / "runs",
                task=task,
                method=method,
                seed=seed,
                config=RunConfig(steps=steps, scoring=ScoringParams()),
                llm=f"{client.name}:{client.model}",
                evaluator=judge.label,
                device=judge.device,
                target=judge.target,
                run_id=f"bench-{method.value}-{task.id.replace('/', '-')}-s{seed}",
            )
            summary = Optimizer(
                store=store,
                client=client,
                evaluator=judge,
                task=task,
                context=task_context(task),
                manifest=manifest,
                folder=folder,
            ).run()
            best = folder / "best.py"
            step_files = sorted((folder / "steps").glob("*.json"))
            steps_data = [json.loads(p.read_text()) for p in step_files]
            best_result = _best_result(steps_data)
            versions = next((a["result"]["versions"] for s in steps_data for a in s["attempts"] if a["result"]), None)
            records[task.id] = {
                "correct": summary.correct,
                "best_speedup_eager": summary.best_speedup,
                "best_step": summary.best_step,
                "best_ms": best_result["candidate_ms"] if best_result else None,
                "eager_ms": best_result["eager_ms"] if best_result else _any_eager(steps_data),
                "verdicts": [s["verdict"] for s in steps_data],
                "strategies": [s["local_id"] or s["global_id"] for s in steps_data],
                "best_source": best.read_text() if best.exists() else None,
                "seconds": round(time.perf_counter() - started, 1),
                "versions": versions,
            }
            console.print(
                f"{method.value:15s} {task.id:35s} best {summary.best_speedup:6.3f}x "
                f"{' '.join(v[:2] for v in records[task.id]['verdicts'])}",
                highlight=False,
            )
            save(method.value, records)
    return records


def _best_result(steps: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The timing of the step that set the run's best (the last improvement)."""
    best = None
    for step in steps:
        if step["verdict"] == Verdict.OK and step["best_after"] > step["best_before"]:
            result = step["attempts"][-1]["result"]
            best = {"candidate_ms": _cost(result["candidate"]), "eager_ms": result["reference_eager"]["median_ms"]}
    return best


def _any_eager(steps: list[dict[str, Any]]) -> float | None:
    for step in steps:
        for attempt in step["attempts"]:
            result = attempt["result"]
            if result and result.get("reference_eager"):
                return float(result["reference_eager"]["median_ms"])
    return None


def _cost(timing: dict[str, Any]) -> float:
    return max(timing["median_ms"], timing.get("host_median_ms") or 0.0)


def time_compile(tasks: list[Task], kind: str, trials: int, state: dict[str, Any], save: Any) -> None:
    """torch.compile (and eager) of each task's reference, on this GPU, in this benchmark:
    judged alongside the reference itself written as a trivially honest candidate is not
    possible (it would compute with PyTorch), so the htam method's best kernel, or else any
    method's, is re-judged with the compiled reference timed."""
    config = EvalConfig(compile_reference=True, trials=trials)
    with _evaluator(kind, config) as judge:
        for task in tasks:
            if task.id in state["compile"]:
                continue
            source = next(
                (m[task.id]["best_source"] for m in state["methods"].values() if m.get(task.id, {}).get("best_source")),
                None,
            )
            if source is None:
                state["compile"][task.id] = None  # no correct kernel anywhere: nothing to time it with
                save()
                continue
            result = judge.evaluate(task, source)
            compile_ms = result.reference_compile.median_ms if result.reference_compile else None
            eager_ms = result.reference_eager.median_ms if result.reference_eager else None
            state["compile"][task.id] = {"compile_ms": compile_ms, "eager_ms": eager_ms}
            console.print(f"torch.compile {task.id:35s} eager {eager_ms} ms, compiled {compile_ms} ms", highlight=False)
            save()


def geomean(values: list[float]) -> float | None:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def summarize(state: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for method, records in state["methods"].items():
        rows = []
        for tid, info in state["tasks"].items():
            rec = records.get(tid)
            if rec is None:
                continue
            timing = state["compile"].get(tid)
            vs_compile = None
            if timing and timing.get("compile_ms") and timing.get("eager_ms"):
                if rec["correct"] and rec["best_ms"]:
                    vs_compile = timing["compile_ms"] / rec["best_ms"]
                else:  # the reference kept: eager against compiled
                    vs_compile = timing["compile_ms"] / timing["eager_ms"]
            rows.append((tid, info, rec, vs_compile))

        def stats(selected: list[tuple[str, Any, Any, float | None]]) -> dict[str, Any]:
            n = len(selected)
            correct = [r for r in selected if r[2]["correct"]]
            compile_values = [r[3] for r in selected if r[3] is not None]
            return {
                "tasks": n,
                "correct": len(correct) / n if n else None,
                "fast_1": sum(r[2]["correct"] and r[2]["best_speedup_eager"] > 1.0 for r in selected) / n
                if n
                else None,
                "geomean_vs_eager": geomean([r[2]["best_speedup_eager"] for r in selected]),
                "geomean_vs_eager_correct_only": geomean([r[2]["best_speedup_eager"] for r in correct]),
                "geomean_vs_compile": geomean(compile_values),
                "compile_timed": len(compile_values),
            }

        families = sorted({info["family"] for _, info, _, _ in rows})
        out[method] = {
            "all": stats(rows),
            "supported": stats([r for r in rows if r[1]["supported"]]),
            "by_family": {f: stats([r for r in rows if r[1]["family"] == f]) for f in families},
            "per_task": {
                tid: {
                    "family": info["family"],
                    "correct": rec["correct"],
                    "speedup_eager": rec["best_speedup_eager"],
                    "speedup_compile": vs,
                    "best_step": rec["best_step"],
                    "verdicts": rec["verdicts"],
                }
                for tid, info, rec, vs in rows
            },
        }
    return out


def _table(summary: dict[str, Any], state: dict[str, Any]) -> None:
    methods = list(summary)
    table = Table(title="Strategy catalog, best kernel per task (speedup over eager / over torch.compile)")
    table.add_column("task")
    table.add_column("family")
    for m in methods:
        table.add_column(m, justify="right")
    for tid, info in state["tasks"].items():
        cells = []
        for m in methods:
            t = summary[m]["per_task"].get(tid)
            if t is None:
                cells.append("")
                continue
            vs = f" / {t['speedup_compile']:.2f}" if t["speedup_compile"] is not None else ""
            cells.append(("" if t["correct"] else "wrong ") + f"{t['speedup_eager']:.2f}{vs}")
        table.add_row(tid, info["family"], *cells)
    console.print(table)
    overall = Table(title="Overall (supported families / all tasks)")
    for col in ("method", "correct", "fast_1", "geomean vs eager", "geomean vs compile"):
        overall.add_column(col, justify="right" if col != "method" else "left")
    for m in methods:
        s, a = summary[m]["supported"], summary[m]["all"]

        def fmt(x: float | None, pct: bool = False) -> str:
            return "-" if x is None else (f"{100 * x:.1f}%" if pct else f"{x:.3f}x")

        overall.add_row(
            m,
            f"{fmt(s['correct'], True)} / {fmt(a['correct'], True)}",
            f"{fmt(s['fast_1'], True)} / {fmt(a['fast_1'], True)}",
            f"{fmt(s['geomean_vs_eager'])} / {fmt(a['geomean_vs_eager'])}",
            f"{fmt(s['geomean_vs_compile'])} / {fmt(a['geomean_vs_compile'])}",
        )
    console.print(overall)


@click.command()
@click.option("--methods", default="htam,feedback,htam-no-prefix", show_default=True)
@click.option("--steps", type=int, default=6, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--tasks", "pattern", help="Only tasks whose id matches (glob or substring).")
@click.option("--root", type=click.Path(exists=True, path_type=Path), help="A KernelBench checkout or level folder.")
@click.option("--evaluator", type=click.Choice(["gpu", "stand-in"]), default="gpu", show_default=True)
@click.option("--trials", type=int, default=100, show_default=True, help="Timed runs per candidate.")
@click.option("--compile/--no-compile", "with_compile", default=True, help="Time torch.compile of the references.")
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="Where to write the results.")
@click.option("--resume", type=click.Path(exists=True, path_type=Path), help="A partial result to continue.")
def main(
    methods: str,
    steps: int,
    seed: int,
    pattern: str | None,
    root: Path | None,
    evaluator: str,
    trials: int,
    with_compile: bool,
    json_path: Path | None,
    resume: Path | None,
) -> None:
    chosen = [Method(m.strip()) for m in methods.split(",") if m.strip()]
    tasks = load_tasks(root or builtin_suite_dir(), pattern)
    state: dict[str, Any] = json.loads(resume.read_text()) if resume else {"methods": {}, "compile": {}}
    state.setdefault("tasks", {})
    for task in tasks:
        family, supported, reason = _family(task)
        state["tasks"][task.id] = {"family": family, "supported": supported, "unsupported_reason": reason}
    config = EvalConfig(trials=trials)
    path = json_path

    def save(method: str | None = None, records: dict[str, Any] | None = None) -> None:
        if method is not None and records is not None:
            state["methods"][method] = {**state["methods"].get(method, {}), **records}
        judged = [r["versions"] for m in state["methods"].values() for r in m.values() if r.get("versions")]
        if judged:
            state["versions"]["judge"] = judged[0]
        state["summary"] = summarize(state)
        assert path is not None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(state, indent=1, default=str))

    with tempfile.TemporaryDirectory(prefix="bench-catalog-") as work, _evaluator(evaluator, config) as judge:
        date = dt.date.today().isoformat()
        slug = "".join(c if c.isalnum() else "-" for c in judge.device.split("(")[0].strip().lower()).strip("-")[:40]
        suffix = "-stand-in" if evaluator == "stand-in" else ""
        path = json_path or RESULTS / f"catalog-{date}-{slug}{suffix}.json"
        state.update(
            {
                "date": date,
                "device": judge.device,
                "evaluator": evaluator,
                "command": "PYTHONPATH=. python bench/bench_catalog.py "
                + " ".join(shlex.quote(a) for a in sys.argv[1:]),
                "config": {"steps": steps, "seed": seed, "trials": trials, "catalog": CATALOG_MODEL},
                "versions": {"htam_graph": __version__, "python": platform.python_version()},
            }
        )
        for method in chosen:
            done = state["methods"].get(method.value, {})
            if all(t.id in done for t in tasks):
                continue  # a resumed benchmark keeps a finished method (a memory is not resumable mid-suite)
            state["methods"][method.value] = {}
            run_method(method, tasks, steps, seed, judge, Path(work) / method.value, save)
    if with_compile:
        time_compile(tasks, evaluator, trials, state, save)
    save()
    _table(state["summary"], state)
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
