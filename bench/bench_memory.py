"""The memory stores at 10^3 to 10^6 recorded steps: import, export and reset as a user runs
them (`htam memory ...`, a process each: wall time and peak memory), scoring and step
update latency, and 1, 4 and 8 concurrent writers.

    python bench/bench_memory.py [--stores local,neo4j] [--sizes 1000,100000,1000000]

Never touches a server it did not start: Neo4j runs from the launcher (Neo4j 5.26, its
default 1 GB heap) in a temporary home on free ports with a random password, and is
stopped at the end. Each size's history is a synthetic export file (runs of 6 steps over
the seed bank, random choices, verdicts and speedups; the statistics are the steps' own,
summed with the stores' StepEffects and checked against a real store at the smallest
size), imported into each store, exported again (and compared byte for byte), measured,
and reset. Prints a table and writes JSON under bench/results/.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import platform
import random
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import neo4j
from rich.console import Console
from rich.table import Table

from htam_graph import __version__, neo4j_server
from htam_graph.config import ScoringParams, Settings
from htam_graph.memory import open_store
from htam_graph.memory.export_file import write_export
from htam_graph.memory.models import (
    MAX_EVIDENCE,
    GlobalNode,
    LocalNode,
    RunRecord,
    SnapshotItem,
    StepUpdate,
    TaskRecord,
    Transition,
)
from htam_graph.memory.outcome import COUNTER_NAMES
from htam_graph.memory.seed import load_seed_bank
from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.memory.store import TREND_DECAY, StepEffects
from htam_graph.vocab import Verdict

STEPS_PER_RUN = 6
TASKS = 50
WARMUP = 300  # untimed scoring calls and step updates first: query plans, caches, the server's JIT
STARTED = datetime(2026, 1, 1, tzinfo=UTC)
console = Console()


def synthetic_steps(n: int, seed: int, run_prefix: str = "run") -> Iterator[tuple[RunRecord, list[StepUpdate]]]:
    """Runs of STEPS_PER_RUN steps, n steps in all, the same for the same seed."""
    bank = load_seed_bank()
    globals_ = [g.id for g in bank.globals]
    locals_of = {g: [loc.id for loc in bank.locals if loc.global_ == g] for g in globals_}
    rng = random.Random(seed)
    made = 0
    for r in range((n + STEPS_PER_RUN - 1) // STEPS_PER_RUN):
        run = RunRecord(id=f"{run_prefix}-{r:07d}", task_id=f"task-{r % TASKS:03d}", seed=r, started_at=STARTED)
        steps: list[StepUpdate] = []
        path: list[str] = []
        best = 1.0
        for i in range(min(STEPS_PER_RUN, n - made)):
            chosen = rng.choice(globals_)
            roll = rng.random()
            verdict = Verdict.COMPILE_ERROR if roll < 0.1 else Verdict.INCORRECT if roll < 0.25 else Verdict.OK
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
                    created_at=STARTED,
                )
            )
            path = [chosen, *path]
        made += len(steps)
        yield run, steps


@dataclass
class History:
    """The statistics of a synthetic history, summed step by step with the stores' own
    StepEffects (what record_step adds), so the file imports as a consistent memory."""

    n: int
    seed: int
    globals: dict[str, GlobalNode] = field(default_factory=dict)
    locals: dict[str, LocalNode] = field(default_factory=dict)
    edges: dict[tuple[str, str], Transition] = field(default_factory=dict)

    def __post_init__(self) -> None:
        bank = load_seed_bank()
        self.globals = {g.id: g for g in bank.global_nodes()}
        self.locals = {loc.id: loc for loc in bank.local_nodes()}
        self.edges = {(t.source, t.target): t for t in bank.transition_priors()}
        for _, steps in synthetic_steps(self.n, self.seed):
            for step in steps:
                self._add(step)

    def _add(self, step: StepUpdate) -> None:
        fx = StepEffects.of(step)
        g, loc = self.globals[step.global_id], self.locals[step.local_id]
        for stats in (g, loc):
            stats.attempts += 1
            stats.reward_sum += step.reward
            for name in COUNTER_NAMES:
                setattr(stats, name, getattr(stats, name) + getattr(fx.outcome.counters, name))
        g.trend = TREND_DECAY * g.trend + (1.0 - TREND_DECAY) * step.reward
        side = "positive" if fx.positive else "negative"
        setattr(loc, side, [step.evidence(), *getattr(loc, side)][:MAX_EVIDENCE])
        for ed in fx.edges:
            t = self.edges.setdefault((ed.source, step.global_id), Transition(source=ed.source, target=step.global_id))
            t.n += ed.count
            t.reward_sum += ed.reward
            t.gain_sum += ed.gain
            for name in COUNTER_NAMES:
                setattr(t, name, getattr(t, name) + getattr(ed.counters, name))
            t.n_by_k = [a + b for a, b in zip(t.n_by_k, ed.dn, strict=True)]
            t.reward_by_k = [a + b for a, b in zip(t.reward_by_k, ed.dr, strict=True)]

    def items(self) -> Iterator[SnapshotItem]:
        yield from (("globals", self.globals[k]) for k in sorted(self.globals))
        yield from (("locals", self.locals[k]) for k in sorted(self.locals))
        yield from (("transitions", self.edges[k]) for k in sorted(self.edges))
        yield from (("tasks", TaskRecord(id=f"task-{t:03d}")) for t in range(min(TASKS, self.n)))
        yield from (("runs", run) for run, _ in synthetic_steps(self.n, self.seed))
        for _, steps in synthetic_steps(self.n, self.seed):
            yield from (("steps", step) for step in steps)

    def write(self, path: Path) -> None:
        with path.open("w") as fh:
            write_export(self.items(), fh)


def check_history_against_a_store(workdir: Path) -> None:
    """The synthetic statistics equal what a real store's record_step makes of the steps."""
    n, seed = 600, 1
    path = workdir / "check.jsonl"
    History(n, seed).write(path)
    with SQLiteStore(workdir / "check.sqlite") as store:
        store.seed(load_seed_bank())
        for run, steps in synthetic_steps(n, seed):
            store.start_run(run, TaskRecord(id=run.task_id))
            for step in steps:
                store.record_step(step)
        with (workdir / "check-store.jsonl").open("w") as fh:
            write_export(store.iter_records(), fh)
    if path.read_text() != (workdir / "check-store.jsonl").read_text():
        raise SystemExit("the synthetic history disagrees with SQLiteStore.record_step")


def percentiles(samples_s: list[float]) -> dict[str, float]:
    ms = sorted(x * 1000 for x in samples_s)
    q = statistics.quantiles(ms, n=100, method="inclusive")
    return {"p50_ms": statistics.median(ms), "p99_ms": q[98], "max_ms": ms[-1], "n": len(ms)}


def env_for(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HTAM_")}
    if settings.store == "neo4j":
        env |= {
            "HTAM_NEO4J_URI": settings.neo4j_uri or "",
            "HTAM_NEO4J_PASSWORD": settings.neo4j_password.get_secret_value(),
        }
    else:
        env |= {"HTAM_STORE": "local", "HTAM_LOCAL_PATH": str(settings.local_path)}
    env["XDG_CONFIG_HOME"] = str(Path(tempfile.gettempdir()) / "htam-bench-no-config")  # no user settings file
    return env


def htam(settings: Settings, *args: str) -> dict[str, float]:
    """`htam ARGS` as a process: wall time and its peak resident memory. The peak is the
    process's own VmHWM, sampled until it exits (ru_maxrss would count this benchmark's
    memory too: Linux carries a parent's peak across fork and exec)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "htam_graph", *args], env=env_for(settings), stdout=subprocess.DEVNULL, stderr=stderr
        )
        peak_kb = 0
        while process.poll() is None:
            peak_kb = max(peak_kb, _own_peak_kb(process.pid))
            time.sleep(0.05)
        wall = time.perf_counter() - t0
        if process.returncode != 0:
            stderr.seek(0)
            raise SystemExit(f"htam {' '.join(args)} failed: {stderr.read().decode()}")
    return {"s": wall, "peak_rss_mb": peak_kb / 1024}


def _own_peak_kb(pid: int) -> int:
    """VmHWM of `pid` once it runs htam (before its exec it is a copy of this process)."""
    try:
        if b"htam_graph" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return 0
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:  # it just exited
        return 0
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)


def server_memory(pid: int | None) -> dict[str, float] | None:
    """The Neo4j process's peak and current resident memory (VmHWM, VmRSS)."""
    if pid is None:
        return None
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {k: int(fields[k].split()[0]) / 1024 for k in ("VmHWM", "VmRSS")}


def measure_latency(settings: Settings, n_score: int, n_update: int) -> dict[str, Any]:
    params = ScoringParams()
    rng = random.Random(7)
    with open_store(settings) as store:
        globals_ = [g.id for g in store.get_globals()]
        for _ in range(WARMUP):  # query plans, caches, the server's JIT
            store.score(rng.sample(globals_, 3), params)
        score_s = []
        for _ in range(n_score):
            prefix = [rng.choice(globals_) for _ in range(rng.randint(0, 3))]
            t0 = time.perf_counter()
            store.score(prefix, params)
            score_s.append(time.perf_counter() - t0)
        update_s = []
        for i, (run, steps) in enumerate(synthetic_steps(n_update + WARMUP, 99, run_prefix="latency")):
            store.start_run(run, TaskRecord(id=run.task_id))
            for step in steps:
                t0 = time.perf_counter()
                store.record_step(step)
                if i * STEPS_PER_RUN >= WARMUP:
                    update_s.append(time.perf_counter() - t0)
    return {"score": percentiles(score_s), "update": percentiles(update_s)}


def _writer(settings: Settings, worker: int, n: int, start_at: float) -> tuple[list[float], float]:
    with open_store(settings) as store:
        batches = list(synthetic_steps(n, 1000 + worker, run_prefix=f"writer-{worker}-{start_at}"))
        for run, _ in batches:
            store.start_run(run, TaskRecord(id=run.task_id))
        while time.time() < start_at:
            time.sleep(0.001)
        t0 = time.perf_counter()
        latencies = []
        for _, steps in batches:
            for step in steps:
                t = time.perf_counter()
                store.record_step(step)
                latencies.append(time.perf_counter() - t)
        return latencies, time.perf_counter() - t0


def measure_writers(settings: Settings, writers: int, steps_each: int) -> dict[str, Any]:
    """`writers` processes record steps at once (random globals and prefixes over the
    seed bank: overlapping edges); throughput over the slowest writer's wall time."""
    start_at = time.time() + 5.0  # every process connected and ready before it
    with mp.get_context("spawn").Pool(writers) as pool:
        results = pool.starmap(_writer, [(settings, w, steps_each, start_at) for w in range(writers)])
    latencies = [x for lat, _ in results for x in lat]
    wall = max(w for _, w in results)
    return {"writers": writers, "steps": len(latencies), "steps_per_s": len(latencies) / wall, **percentiles(latencies)}


def start_server(home: Path) -> tuple[Settings, neo4j_server.ServerInfo]:
    settings = Settings(
        store="neo4j",
        neo4j_uri=f"bolt://127.0.0.1:{free_port()}",
        neo4j_password=secrets.token_urlsafe(16),
    )
    info = neo4j_server.start(settings, wait_s=240, http_port=free_port(), home=home)
    return settings, info


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _stop_on_signals() -> None:
    """Ctrl-C or a plain kill still run the cleanup (stop the benchmark's own Neo4j, delete
    its files), also when started in the background, where SIGINT is ignored."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


@click.command()
@click.option("--stores", default="local,neo4j", show_default=True)
@click.option("--sizes", default="1000,100000,1000000", show_default=True)
@click.option("--scores", "n_score", default=500, show_default=True, help="Scoring calls per measurement.")
@click.option("--updates", "n_update", default=300, show_default=True, help="Sequential step updates per measurement.")
@click.option("--writers", default="1,4,8", show_default=True, help="Concurrent writer processes to try.")
@click.option("--writer-steps", default=150, show_default=True, help="Steps each concurrent writer records.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="JSON output path.")
def main(
    stores: str, sizes: str, n_score: int, n_update: int, writers: str, writer_steps: int, out: Path | None
) -> None:
    _stop_on_signals()
    rows: list[dict[str, Any]] = []
    started = datetime.now(UTC)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="htam-bench-") as tmp:
        workdir = Path(tmp)
        check_history_against_a_store(workdir)
        server: tuple[Settings, neo4j_server.ServerInfo] | None = None
        if "neo4j" in stores.split(","):
            server = start_server(workdir / "neo4j")
            console.print(f"Neo4j started at {server[1].uri} (home {workdir / 'neo4j'})")
        try:
            for n in (int(s) for s in sizes.split(",")):
                path = workdir / f"history-{n}.jsonl"
                t0 = time.perf_counter()
                History(n, n).write(path)
                size_mb = path.stat().st_size / 1e6
                console.print(f"{n} steps: history written in {time.perf_counter() - t0:.0f} s ({size_mb:.0f} MB)")
                for kind in stores.split(","):
                    settings = (
                        server[0]
                        if kind == "neo4j" and server
                        else Settings(store="local", local_path=workdir / f"{n}.sqlite")
                    )
                    pid = server[1].pid if kind == "neo4j" and server else None
                    row = run_size(settings, kind, n, path, workdir, n_score, n_update, writers, writer_steps, pid)
                    rows.append(row)
                    console.print(row)
        finally:
            versions = {}
            if server is not None:
                versions = {"neo4j_server": neo4j_server.status(server[0]).version}
                neo4j_server.stop(server[0], home=workdir / "neo4j")
    print_table(rows)
    out = out or Path(__file__).parent / "results" / f"memory-{started:%Y-%m-%d}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "date": started.isoformat(timespec="seconds"),
                "command": " ".join(["python", *sys.argv]),
                "machine": {
                    "cpus": os.cpu_count(),
                    "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
                    "platform": platform.platform(),
                    "load_average_before": load_before,
                    "load_average_after": os.getloadavg(),
                },
                "versions": {
                    "htam_graph": __version__,
                    "python": platform.python_version(),
                    "neo4j_driver": neo4j.__version__,
                    "neo4j_heap": "launcher default (-Xmx1g)",
                    **versions,
                },
                "goals": {
                    "neo4j_update_p50_ms": 10,
                    "neo4j_8_writers_steps_per_s": 150,
                    "neo4j_8_writers_p99_ms": 250,
                    "scoring_p99_ms_at_1e6": 10,
                },
                "results": rows,
            },
            indent=2,
        )
    )
    console.print(f"wrote {out}")


def run_size(
    settings: Settings,
    kind: str,
    n: int,
    path: Path,
    workdir: Path,
    n_score: int,
    n_update: int,
    writers: str,
    writer_steps: int,
    pid: int | None,
) -> dict[str, Any]:
    row: dict[str, Any] = {"store": kind, "steps": n}
    row["import"] = htam(settings, "memory", "import", str(path))
    exported = workdir / f"export-{kind}-{n}.jsonl"
    row["export"] = htam(settings, "memory", "export", "-o", str(exported))
    row["export"]["identical_to_import"] = exported.read_bytes() == path.read_bytes()
    exported.unlink()
    row |= measure_latency(settings, n_score, n_update)
    row["writers"] = [measure_writers(settings, int(w), writer_steps) for w in writers.split(",")]
    row["reset"] = htam(settings, "memory", "reset", "--yes")
    row["server_memory_mb"] = server_memory(pid)
    return row


def print_table(rows: list[dict[str, Any]]) -> None:
    table = Table(title="Memory stores (ms unless noted)")
    columns = ["store", "steps", "import s (MB)", "export s (MB)", "reset s", "score p50/p99", "update p50/p99"]
    columns += ["writers: steps/s, p99"]
    for col in columns:
        table.add_column(col, justify="right")
    for r in rows:
        writers = "  ".join(f"{w['writers']}: {w['steps_per_s']:.0f}/s {w['p99_ms']:.0f}" for w in r["writers"])
        table.add_row(
            r["store"],
            f"{r['steps']:,}",
            f"{r['import']['s']:.1f} ({r['import']['peak_rss_mb']:.0f})",
            f"{r['export']['s']:.1f} ({r['export']['peak_rss_mb']:.0f})",
            f"{r['reset']['s']:.1f}",
            f"{r['score']['p50_ms']:.2f} / {r['score']['p99_ms']:.2f}",
            f"{r['update']['p50_ms']:.2f} / {r['update']['p99_ms']:.2f}",
            writers,
        )
    console.print(table)


if __name__ == "__main__":
    main()
