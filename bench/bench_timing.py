"""Where does run-to-run timing spread come from? A study of the timing protocol (needs a GPU).

For a few suite tasks and their honest candidates, in this one process, it times the same
kernel many times under controlled changes and reports the median of each:

- `device`: the runner's protocol (timing.time_gpu: whole-device sync before the end event);
- `stream`: the end event recorded on the stream right after the call, then a sync (what
  do_bench does): the difference to `device` is host latency charged to the candidate;
- rounds that re-use the same input buffers, rounds with fresh allocations at shifted
  addresses, and rounds after an idle gap (the GPU left idle for --idle-s seconds, as
  between evaluations while the CPU compiles or checks).

Prints a table and writes JSON (per-round samples with wall-clock times, to line up with
an `nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,... -lms 250` log taken beside it).

What it showed on the H200 (bench/results/timing-2026-11-30-h200.json and its
nvidia-smi log): `device` adds 13-21 us to every median and has a tail of hundreds of us;
round medians of our candidates jumped by 5-50% at full clocks while the eager kernels'
did not, and SW power-cap dips to 1.5 GHz left memory-bound times unchanged. That pointed
at the host: the fix is the gate in htam_graph/runner/timing.py.

    PYTHONPATH=. python3 bench/bench_timing.py [--rounds 6] [--idle-s 2] [--out FILE]
"""

from __future__ import annotations

import datetime as dt
import json
import runpy
import statistics
import sys
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TASKS = (
    "level1/13_MaxPool2d",
    "level2/2_Swish_Bias_Scale",
    "level1/10_RMSNorm",
    "level1/9_LayerNorm",
    "level2/6_Conv2d_Bias_ReLU",
    "level1/2_Batched_matmul",
)


def time_trials(fn, flusher, trials: int, sync_before_end: bool) -> list[float]:
    """Per-trial ms. sync_before_end: the first protocol (a device-wide synchronize, then
    the end event: host latency inside the interval); else the end event on the stream right
    after the call, then the synchronize (what do_bench does)."""
    import torch

    pairs = []
    for _ in range(trials):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flusher.flush()
        start.record()
        fn()
        if sync_before_end:
            torch.cuda.synchronize()
        end.record()
        torch.cuda.synchronize()
        pairs.append((start, end))
    return [s.elapsed_time(e) for s, e in pairs]


def warm(fn, ms: float = 100.0) -> None:
    import torch

    deadline = time.perf_counter() + ms / 1e3
    while time.perf_counter() < deadline:
        fn()
    torch.cuda.synchronize()


@click.command()
@click.option("--task", "tasks", multiple=True, default=DEFAULT_TASKS, show_default=True)
@click.option("--rounds", default=6, show_default=True, help="rounds per condition")
@click.option("--trials", default=100, show_default=True)
@click.option("--idle-s", default=2.0, show_default=True, help="idle gap before an 'after idle' round")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="JSON file (default under bench/results)")
def main(tasks: tuple[str, ...], rounds: int, trials: int, idle_s: float, out: Path | None) -> None:
    import torch

    from htam_graph.runner.timing import L2Flusher
    from htam_graph.runner.worker import _copy_matching_weights
    from htam_graph.tasks import resolve_task

    console = Console()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    flusher = L2Flusher()
    spacers = []  # kept alive so each fresh allocation lands at a new address
    rows, samples = [], []
    for task_id in tasks:
        task = resolve_task(task_id)
        module = task.load_module()
        level, name = task_id.split("/")
        cand = runpy.run_path(str(REPO / "bench" / "candidates" / level / f"{name}.py"))
        init = list(module.get_init_inputs())
        torch.manual_seed(0)
        ref = module.Model(*init).cuda()
        new = cand["ModelNew"](*init).cuda()
        _copy_matching_weights(ref, new)

        def inputs(seed: int) -> list:
            torch.manual_seed(seed)
            with torch.device("cuda"):
                return list(module.get_inputs())

        x = inputs(1)
        results: dict[str, list[float]] = {}

        def record(cond: str, method: str, times: list[float]) -> None:
            med = statistics.median(times)
            results.setdefault(f"{cond}/{method}", []).append(med)
            samples.append(
                {
                    "task": task_id,
                    "condition": cond,
                    "method": method,
                    "t": time.time(),
                    "median_ms": med,
                    "min_ms": min(times),
                    "max_ms": max(times),
                    "cv": statistics.pstdev(times) / statistics.fmean(times),
                }
            )

        with torch.no_grad():
            for fn_name, fn in (("candidate", lambda: new(*x)), ("eager", lambda: ref(*x))):
                for _ in range(rounds):  # the same buffers, back to back
                    warm(fn)
                    record(f"{fn_name} same-buffers", "device", time_trials(fn, flusher, trials, True))
                    record(f"{fn_name} same-buffers", "stream", time_trials(fn, flusher, trials, False))
            for r in range(rounds):  # fresh allocations at shifted addresses
                spacers.append(torch.empty(int(1 + r * 7919) * 4096, dtype=torch.uint8, device="cuda"))
                x = inputs(1)
                warm(lambda: new(*x))
                record("candidate fresh-buffers", "device", time_trials(lambda: new(*x), flusher, trials, True))
                record("candidate fresh-buffers", "stream", time_trials(lambda: new(*x), flusher, trials, False))
            for _ in range(rounds):  # after an idle gap, with the protocol's 100 ms warm-up
                torch.cuda.synchronize()
                time.sleep(idle_s)
                warm(lambda: new(*x))
                record("candidate after-idle", "device", time_trials(lambda: new(*x), flusher, trials, True))
        for key, meds in results.items():
            cond, method = key.rsplit("/", 1)
            rows.append(
                {
                    "task": task_id,
                    "condition": cond,
                    "method": method,
                    "rounds": len(meds),
                    "median_ms": statistics.median(meds),
                    "min_ms": min(meds),
                    "max_ms": max(meds),
                    "spread": (max(meds) - min(meds)) / min(meds),
                }
            )
        del x, ref, new
        torch.cuda.empty_cache()

    table = Table("task", "condition", "method", "median ms", "min", "max", "spread")
    for r in rows:
        table.add_row(
            r["task"],
            r["condition"],
            r["method"],
            f"{r['median_ms']:.4f}",
            f"{r['min_ms']:.4f}",
            f"{r['max_ms']:.4f}",
            f"{r['spread'] * 100:.1f}%",
        )
    console.print(table)
    report = {
        "date": dt.date.today().isoformat(),
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "command": " ".join(["python3", *sys.argv]),
        "trials": trials,
        "rows": rows,
        "samples": samples,
    }
    path = out or REPO / "bench" / "results" / f"timing-{report['date']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
