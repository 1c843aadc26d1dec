"""Scoring and step-update latency of the memory stores at 10^3, 10^4 and 10^5 recorded steps.

    python bench/bench_memory.py [--stores local,neo4j] [--sizes 1000,10000,100000]

A synthetic history (runs of 6 steps over the seed bank, random prefixes and rewards) is
recorded step by step into a local SQLite file once per size, then moved into each store
with `import_snapshot`; latencies are then measured on that store: transition-attended
scoring for random prefixes, and new step updates (one transaction each). Prints a table
and writes JSON under bench/results/. Goal: scoring p99 under 20 ms at 10^5 steps.
"""

from __future__ import annotations

import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import click
from rich.console import Console
from rich.progress import track
from rich.table import Table

from htam_graph import __version__, neo4j_server
from htam_graph.config import ScoringParams, Settings
from htam_graph.memory import open_store
from htam_graph.memory.models import RunRecord, StepUpdate, TaskRecord
from htam_graph.memory.seed import load_seed_bank
from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.vocab import Verdict

STEPS_PER_RUN = 6
WARMUP_UPDATES = 30
console = Console()


def synthetic_steps(n: int, rng: random.Random, run_prefix: str = "run") -> tuple[list[RunRecord], list[StepUpdate]]:
    bank = load_seed_bank()
    globals_ = [g.id for g in bank.globals]
    locals_of = {g: [loc.id for loc in bank.locals if loc.global_ == g] for g in globals_}
    runs, steps = [], []
    for r in range((n + STEPS_PER_RUN - 1) // STEPS_PER_RUN):
        run = RunRecord(id=f"{run_prefix}-{r}", task_id=f"task-{r % 50}", seed=r)
        runs.append(run)
        path: list[str] = []
        best = 1.0
        for i in range(min(STEPS_PER_RUN, n - len(steps))):
            chosen = rng.choice(globals_)
            outcome = rng.random()
            verdict = Verdict.COMPILE_ERROR if outcome < 0.1 else Verdict.INCORRECT if outcome < 0.25 else Verdict.OK
            speedup = round(rng.uniform(0.5, 2.0) * best, 3) if verdict == Verdict.OK else None
            before, best = best, max(best, speedup or 0.0)
            steps.append(
                StepUpdate(
                    id=f"{run.id}:{i}",
                    run_id=run.id,
                    task_id=run.task_id,
                    index=i,
                    prefix=path[:3],
                    global_id=chosen,
                    local_id=rng.choice(locals_of[chosen]),
                    verdict=verdict,
                    speedup=speedup,
                    best_before=before,
                    best_after=best,
                )
            )
            path = [chosen, *path]
    return runs, steps


def build_history(n: int, workdir: Path) -> SQLiteStore:
    store = SQLiteStore(workdir / f"history-{n}.sqlite")
    store.seed(load_seed_bank())
    runs, steps = synthetic_steps(n, random.Random(n))
    for run in runs:
        store.start_run(run, TaskRecord(id=run.task_id))
    for step in track(steps, description=f"recording {n} steps", console=console, transient=True):
        store.record_step(step)
    return store


def percentiles(samples_s: list[float]) -> dict[str, float]:
    ms = sorted(x * 1000 for x in samples_s)
    q = statistics.quantiles(ms, n=100, method="inclusive")
    return {"p50_ms": statistics.median(ms), "p99_ms": q[98], "max_ms": ms[-1], "n": len(ms)}


def measure(store, n_score: int, n_update: int, rng: random.Random) -> dict:
    params = ScoringParams()
    globals_ = [g.id for g in store.get_globals()]
    for _ in range(200):  # warm caches, query plans and the server's JIT
        store.score(rng.sample(globals_, 3), params)
    score_s = []
    for _ in range(n_score):
        prefix = [rng.choice(globals_) for _ in range(rng.randint(0, 3))]
        t0 = time.perf_counter()
        store.score(prefix, params)
        score_s.append(time.perf_counter() - t0)
    runs, steps = synthetic_steps(n_update + WARMUP_UPDATES, rng, run_prefix=f"bench-{rng.random():.6f}")
    for run in runs:
        store.start_run(run, TaskRecord(id=run.task_id))
    for step in steps[:WARMUP_UPDATES]:
        store.record_step(step)
    update_s = []
    for step in steps[WARMUP_UPDATES:]:
        t0 = time.perf_counter()
        store.record_step(step)
        update_s.append(time.perf_counter() - t0)
    return {"score": percentiles(score_s), "update": percentiles(update_s)}


@click.command()
@click.option("--stores", default="local,neo4j", show_default=True)
@click.option("--sizes", default="1000,10000,100000", show_default=True)
@click.option("--scores", "n_score", default=500, show_default=True, help="Scoring calls per measurement.")
@click.option("--updates", "n_update", default=200, show_default=True, help="Step updates per measurement.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="JSON output path.")
def main(stores: str, sizes: str, n_score: int, n_update: int, out: Path | None) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in sizes.split(",")):
            history = build_history(n, Path(tmp))
            snap = history.export()
            for kind in stores.split(","):
                settings = Settings(store=kind, local_path=Path(tmp) / f"{kind}-{n}.sqlite")
                with open_store(settings) as store:
                    store.reset()
                    t0 = time.perf_counter()
                    store.import_snapshot(snap)
                    import_s = time.perf_counter() - t0
                    result = measure(store, n_score, n_update, random.Random(7))
                    store.reset()
                rows.append({"store": kind, "steps": n, "import_s": import_s, **result})
                console.print(
                    f"{kind} @ {n} steps: scoring p99 {result['score']['p99_ms']:.2f} ms, "
                    f"update p99 {result['update']['p99_ms']:.2f} ms"
                )
            history.close()
    table = Table(title="Memory store latency (ms)")
    for col in ["store", "steps", "score p50", "score p99", "update p50", "update p99", "import s"]:
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            r["store"],
            str(r["steps"]),
            f"{r['score']['p50_ms']:.2f}",
            f"{r['score']['p99_ms']:.2f}",
            f"{r['update']['p50_ms']:.2f}",
            f"{r['update']['p99_ms']:.2f}",
            f"{r['import_s']:.1f}",
        )
    console.print(table)
    now = datetime.now(UTC)
    out = out or Path(__file__).parent / "results" / f"memory-{now:%Y-%m-%d}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "date": now.isoformat(timespec="seconds"),
                "command": " ".join(["python", *sys.argv]),
                "machine": {
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "platform": platform.platform(),
                },
                "htam_graph": __version__,
                "neo4j": neo4j_server.status(Settings(store="neo4j")).version if "neo4j" in stores else None,
                "goal": "scoring p99 under 20 ms at 1e5 steps",
                "results": rows,
            },
            indent=2,
        )
    )
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
