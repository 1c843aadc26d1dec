"""The strategy catalog on tasks that are not in this repo: does it generalise by operator
family, not by task? No GPU needed.

For every KernelBench-format task under ROOT (a KernelBench checkout's `KernelBench`
folder, one of its level folders, or any folder of task files): the operator family the
catalog recognises in the reference's graph (catalog/families.py), or why it has none. For
each supported task, three kernels: the base one, the family's first kernel (the one every
run of the catalog starts from, catalog/strategies.py: FIRST_KERNEL) and the one with every
strategy of the family's order applied ("all"). Each is put through
- the judge's static checks (runner/static_checks.py);
- an nvcc build for sm_90 (runner/build.py), all in parallel;
- a run on the CPU simulator of CUDA (htam_graph/runner/cpu_cuda.h: real barriers and warp
  shuffles between OS threads) on the task with its module-level size constants made
  small (sizes that must divide, e.g. channels into groups, made small and even when the odd
  ones change the graph), compared with the float64 reference at the judge's tolerances, as the catalog's
  own tests do for the built-in suite. A task whose reference fails at the small sizes
  (e.g. a convolution left with no output pixels) is counted as not simulated.

What this cannot say: speed, and correctness at the task's own sizes on a GPU; that is
the judge's (`bench/bench_catalog.py` with a KernelBench checkout as SUITE).

    python bench/bench_catalog_coverage.py ~/KernelBench/KernelBench --level 1,2 --out coverage.json

Prints a table per level and family and writes the JSON (every task's row; with the
date, command and versions).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import math
import multiprocessing as mp
import os
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import click
import torch
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from htam_graph.catalog.families import Recognition, load_source, recognize  # noqa: E402
from htam_graph.catalog.ir import Unsupported  # noqa: E402
from htam_graph.catalog.knobs import Knobs  # noqa: E402
from htam_graph.catalog.strategies import first_kernel  # noqa: E402
from htam_graph.catalog.variants import EVEN_SIZES, everything, recognized, render, shrink  # noqa: E402
from htam_graph.runner.build import BuildSettings, build_many, find_nvcc, nvcc_version  # noqa: E402
from htam_graph.runner.cpu_cuda import compare, compile_cpu, shim  # noqa: E402
from htam_graph.runner.formats import static_cuda_sources  # noqa: E402
from htam_graph.runner.static_checks import static_check  # noqa: E402
from htam_graph.tasks import Task, load_tasks  # noqa: E402

ARCH = "sm_90"


def _knobs(rec: Recognition, variant: str) -> Knobs:
    if variant == "first":
        return first_kernel(rec, functools.partial(render, rec))[0]
    return everything(rec) if variant == "all" else Knobs()


def examine(task: Task) -> dict[str, Any]:
    """The task's family and its three kernels' static findings and CUDA sources, plus the
    small task and its kernels for the simulator (built and run later, in parallel)."""
    row: dict[str, Any] = {"task": task.id, "level": task.level}
    started = time.perf_counter()
    try:
        rec = recognize(task.source)
    except Unsupported as e:
        row.update(recognize_s=time.perf_counter() - started, family="unsupported", reason=str(e)[:300])
        return row
    row["recognize_s"] = time.perf_counter() - started
    row.update(family=rec.family.value, graph=rec.describe(), kernels={})
    small = shrink(task.source)
    small_rec = recognized(small)
    if small_rec is None or small_rec.family != rec.family:  # sizes that must divide (groups): even ones
        small = shrink(task.source, EVEN_SIZES)
        small_rec = recognized(small)
    try:
        variants = [(v, render(rec, _knobs(rec, v))) for v in ("base", "first", "all")]
    except Unsupported as e:  # the graph is of a family, but no template takes this program
        row.update(family="unsupported", reason=f"recognised as {rec.family.value}, but {e}"[:300], kernels={})
        return row
    for variant, candidate in variants:
        findings = [f"{f.kind.value}: {f.detail}" for f in static_check(candidate, rec.dtype, "native")]
        cuda = static_cuda_sources(candidate)
        entry: dict[str, Any] = {"static": findings, "cuda": cuda, "candidate": candidate}
        if small_rec is not None and small_rec.family == rec.family:
            with contextlib.suppress(Unsupported):  # counted as not simulated
                entry["small_candidate"] = render(small_rec, _knobs(small_rec, variant))
        row["kernels"][variant] = entry
    row["small"] = small if small_rec is not None else None
    return row


def simulate(row: dict[str, Any], workdir: Path) -> None:
    for entry in row.get("kernels", {}).values():
        candidate = entry.pop("small_candidate", None)
        if candidate is None or row.get("small") is None:
            entry["simulated"] = "not simulated: the task at small sizes is another graph"
            continue
        try:
            task = load_source(row["small"])
            error, where = compare(task, candidate, workdir)
        except Exception as e:  # the reference at small sizes, or the simulator's build
            entry["simulated"] = f"not simulated: {type(e).__name__}: {str(e)[:200]}"
            continue
        entry["error"] = error if math.isfinite(error) else None
        entry["simulated"] = "ok" if error <= 1.0 else f"wrong: error {error:.3g} x tolerance, {where}"


def _simulate_child(row: dict[str, Any], workdir: Path, conn: Connection) -> None:
    simulate(row, workdir)
    conn.send({k: {"simulated": e["simulated"], "error": e.get("error")} for k, e in row["kernels"].items()})


def simulate_all(rows: list[dict[str, Any]], workdir: Path, limit_s: float, say: Any) -> None:
    """Each task's kernels on the simulator in a child process of its own (forked: the
    simulator runs a thread per CUDA thread), cores at a time, each within `limit_s`."""
    ctx = mp.get_context("fork")
    todo = [r for r in rows if r.get("kernels")]
    running: list[tuple[dict[str, Any], Any, Connection, float]] = []
    done = 0
    while todo or running:
        while todo and len(running) < (os.cpu_count() or 1):
            row = todo.pop(0)
            ours, theirs = ctx.Pipe(duplex=False)
            child = ctx.Process(target=_simulate_child, args=(row, workdir, theirs), daemon=True)
            child.start()
            theirs.close()
            running.append((row, child, ours, time.monotonic()))
        time.sleep(0.2)
        for item in list(running):
            row, child, conn, began = item
            outcome = None
            if conn.poll():
                with contextlib.suppress(EOFError):
                    outcome = conn.recv()
            elif child.is_alive() and time.monotonic() - began < limit_s:
                continue
            if child.is_alive():
                child.kill()
            child.join()
            conn.close()
            running.remove(item)
            for name, entry in row["kernels"].items():
                entry.pop("small_candidate", None)
                if outcome is not None:
                    entry.update(outcome[name])
                else:
                    entry["simulated"] = f"not simulated: over {limit_s:.0f} s on the simulator, or it crashed"
            done += 1
            say(
                f"simulated {done}/{len(rows)}: {row['task']}: "
                + ", ".join(f"{n} {e['simulated'][:60]}" for n, e in row["kernels"].items())
            )


@click.command()
@click.argument("root", type=click.Path(exists=True, path_type=Path))
@click.option("--level", "levels", default="1,2", show_default=True, help="keep the tasks of these levels")
@click.option(
    "--simulate/--no-simulate",
    "simulate_kernels",
    default=True,
    show_default=True,
    help="run them on the CPU simulator",
)
@click.option(
    "--out", type=click.Path(path_type=Path), help="the JSON file [bench/results/catalog-coverage-<date>.json]"
)
@click.option("--limit", "limit_s", default=30.0, show_default=True, help="seconds per task on the simulator")
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    help="keep the nvcc and simulator builds here (a second run reuses them) [a fresh temporary folder]",
)
@click.option(
    "--write-candidates",
    type=click.Path(file_okay=False, path_type=Path),
    help="also write each supported task's tuned kernel (all) as DIR/<level>/<task>.py, for the GPU judge "
    "(bench/bench_runner.py --kernelbench ROOT --candidates DIR)",
)
def main(
    root: Path,
    levels: str,
    simulate_kernels: bool,
    out: Path | None,
    limit_s: float,
    workdir: Path | None,
    write_candidates: Path | None,
) -> None:
    # One torch thread: the simulator's children are forked, and a fork after OpenMP's
    # thread pool has run hangs in the child's first parallel region.
    torch.set_num_threads(1)
    console = Console()
    if not console.is_terminal:
        console = Console(width=140)
    wanted = {int(x) for x in levels.split(",") if x.strip()}
    tasks = [t for t in load_tasks(root) if t.level in wanted]
    if not tasks:
        raise click.UsageError(f"{root}: no KernelBench-format tasks of level {levels}")
    workdir = workdir or Path(tempfile.mkdtemp(prefix="catalog-coverage-"))
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    rows = []
    with console.status("recognising") as status:
        for i, task in enumerate(tasks, 1):
            status.update(f"recognising {i}/{len(tasks)}: {task.id}")
            rows.append(examine(task))
    settings = BuildSettings(nvcc=find_nvcc(), cache_dir=workdir / "nvcc", arch=ARCH)
    entries = [e for r in rows for e in r.get("kernels", {}).values()]
    console.print(f"building {len(entries)} kernels with nvcc ({ARCH})")
    builds = build_many([e["cuda"][0] if len(e["cuda"]) == 1 else "" for e in entries], settings)
    for entry, build in zip(entries, builds, strict=True):
        entry["built"] = len(entry["cuda"]) == 1 and build.ok
        entry["build_errors"] = "" if entry["built"] else (build.errors or "not one CUDA_SRC string")[:500]
        del entry["cuda"]
    for row in rows:  # the tuned kernels that pass the static checks, for the GPU judge
        tuned = row.get("kernels", {}).get("all")
        if write_candidates is not None and tuned is not None and not tuned["static"] and tuned["built"]:
            path = write_candidates / f"{row['task']}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(tuned["candidate"])
        for entry in row.get("kernels", {}).values():
            del entry["candidate"]
    if simulate_kernels:
        shim(workdir)
        smalls = [e["small_candidate"] for e in entries if e.get("small_candidate")]
        console.print(f"compiling {len(smalls)} small kernels for the CPU simulator")
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            sources = [static_cuda_sources(s)[0] for s in smalls]  # ast.parse is not thread-safe on 3.11
            list(pool.map(lambda src: _try(compile_cpu, src, workdir), sources))
        simulate_all(rows, workdir, limit_s, lambda line: console.print(line, highlight=False))
    for row in rows:
        row.pop("small", None)
    summary = summarize(rows)
    report = {
        "date": dt.date.today().isoformat(),
        "command": " ".join(["python", "bench/bench_catalog_coverage.py", *sys.argv[1:]]),
        "root": str(root),
        "versions": {"torch": torch.__version__, "nvcc": nvcc_version(settings.nvcc), "python": sys.version.split()[0]},
        "seconds": time.perf_counter() - started,
        "summary": summary,
        "tasks": rows,
    }
    out = out or REPO / "bench" / "results" / f"catalog-coverage-{report['date']}.json"
    out.write_text(json.dumps(report, indent=1, default=str) + "\n")
    show(console, summary)
    console.print(f"wrote {out}")


def _try(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:  # reported per kernel by simulate()
        return None


def _kernel_ok(entry: dict[str, Any]) -> bool:
    return not entry["static"] and entry["built"] and entry.get("simulated", "ok") == "ok"


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def count(subset: list[dict[str, Any]]) -> dict[str, Any]:
        supported = [r for r in subset if r["family"] != "unsupported"]
        kernels = [e for r in supported for e in r["kernels"].values()]
        simulated = [e for e in kernels if e.get("simulated", "").startswith(("ok", "wrong"))]
        return {
            "tasks": len(subset),
            "supported": len(supported),
            "kernels": len(kernels),
            "static_clean": sum(not e["static"] for e in kernels),
            "built": sum(e["built"] for e in kernels),
            "simulated": len(simulated),
            "simulated_ok": sum(e["simulated"] == "ok" for e in simulated),
            "tasks_all_ok": sum(all(_kernel_ok(e) for e in r["kernels"].values()) for r in supported),
        }

    by_level = {
        str(level): count([r for r in rows if r["level"] == level]) for level in sorted({r["level"] for r in rows})
    }
    families = sorted({r["family"] for r in rows})
    return {
        "all": count(rows),
        "by_level": by_level,
        "by_family": {f: count([r for r in rows if r["family"] == f]) for f in families},
        "unsupported_reasons": Counter(
            r.get("reason", "")[:80] for r in rows if r["family"] == "unsupported"
        ).most_common(12),
    }


def show(console: Console, summary: dict[str, Any]) -> None:
    table = Table(
        "group", "tasks", "supported", "kernels", "static clean", "built", "simulated ok / run", "tasks all ok"
    )
    groups = [("all", summary["all"])]
    groups += [(f"level {k}", v) for k, v in summary["by_level"].items()]
    groups += list(summary["by_family"].items())
    for name, c in groups:
        table.add_row(
            name,
            str(c["tasks"]),
            str(c["supported"]),
            str(c["kernels"]),
            str(c["static_clean"]),
            str(c["built"]),
            f"{c['simulated_ok']} / {c['simulated']}",
            str(c["tasks_all_ok"]),
        )
    console.print(table)
    for reason, n in summary["unsupported_reasons"]:
        console.print(f"unsupported x{n}: {reason}")


if __name__ == "__main__":
    main()
