"""Does the memory earn its place? A train/test comparison of HTAM against its controls,
replayed on a recorded table of the catalog's kernel space (no GPU; docs/method.md,
"Comparing methods").

Protocol (fixed before any outcome was seen; written into the report):
- world: the table (`htam catalog record`), the catalog's space (`--model catalog-space-v1`):
  every run starts from the task's base kernel; T steps; reward_from = parent (signed gain
  over the kernel the step modified, 0 within the dead-band);
- tasks: --train and --test lists (bench/tables/suite-train.txt, suite-test.txt: alternate
  tasks of each family);
- fresh: every method on the test tasks with a fresh seed-bank memory per method and seed
  (the memory carries over from task to task within a seed, as in every bench);
- trained: for each seed s, each memory method runs the training tasks (seed s), and its
  memory then runs the test tasks (seed s) - trained vs fresh is paired by seed;
- metric: per method and seed, the geometric mean over test tasks of the best speedup over
  eager (a task without a correct kernel counts 1.0); mean and 95% CI over seeds (t), and
  paired differences of log geomeans with bootstrap 95% CIs (10,000 resamples of seeds).
- methods: memory methods htam, htam-no-prefix and flat (flat added once it retrieved by
  similarity, docs/method.md), controls random, feedback, expert; --methods runs a subset;
- expert is the catalog's hand-written order per family: an oracle, reported as one.

    python bench/bench_memory_value.py --table bench/results/table-.../table.parquet --seeds 10 --out OUT
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
MEMORY = ["htam", "htam-no-prefix", "flat"]
CONTROLS = ["random", "feedback", "expert"]


def bench(out: Path, tasks: Path, methods: list[str], seeds: int, args: argparse.Namespace, *extra: str) -> None:
    cmd = [
        sys.executable, "-m", "htam_graph", "bench", str(tasks), "--llm", "catalog", "--model", "catalog-space-v1",
        "--evaluator", "replay", "--replay", str(args.table), "--method", ",".join(methods), "--seeds", str(seeds),
        "--steps", str(args.steps), "--workers", str(args.workers), "--no-compile-reference", "--out", str(out),
        *extra,
    ]  # fmt: skip
    env = {**os.environ, "HTAM_SCORING__REWARD_FROM": "parent", "HTAM_SCORING__TAU": str(args.tau)}
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)


def runs(folder: Path) -> pd.DataFrame:
    return pd.read_parquet(folder / "results" / "runs.parquet")


def geomeans(frame: pd.DataFrame) -> pd.DataFrame:
    """Per method and seed: log geomean over tasks of the best speedup (1.0 without a correct kernel)."""
    f = frame.assign(best=frame["speedup"].where(frame["correct"], 1.0).clip(lower=1e-9))
    return f.groupby(["method", "seed"])["best"].apply(lambda s: float(np.mean(np.log(s)))).reset_index(name="log_gm")


# Student's t 0.975 quantiles by degrees of freedom (1..30; the normal's 1.96 beyond)
T975 = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
    2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
]  # fmt: skip


def t_ci(values: np.ndarray) -> tuple[float, float, float]:
    m = float(np.mean(values))
    if len(values) < 2:
        return m, m, m
    q = T975[len(values) - 2] if len(values) - 1 <= len(T975) else 1.96
    h = float(q * np.std(values, ddof=1) / math.sqrt(len(values)))
    return m, m - h, m + h


def boot_ci(diffs: np.ndarray, rng: np.random.Generator, n: int = 10_000) -> tuple[float, float, float]:
    means = rng.choice(diffs, size=(n, len(diffs)), replace=True).mean(axis=1)
    return float(np.mean(diffs)), float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--table", type=Path, required=True)
    p.add_argument("--train", type=Path, default=ROOT / "bench/tables/suite-train.txt")
    p.add_argument("--test", type=Path, default=ROOT / "bench/tables/suite-test.txt")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--tau", type=float, default=0.5)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--methods", default=",".join([*MEMORY, *CONTROLS]), help="comma-separated; default: all")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    chosen = args.methods.split(",")
    memory, controls = [m for m in MEMORY if m in chosen], [m for m in CONTROLS if m in chosen]
    began = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    bench(args.out / "fresh", args.test, [*memory, *controls], args.seeds, args)
    bench(args.out / "train", args.train, memory, args.seeds, args)
    # each method and seed starts from its own trained memory (train/memory/htam-s3.json, ...)
    bench(args.out / "trained", args.test, memory, args.seeds, args, "--memory-from", str(args.out / "train/memory"))
    trained = runs(args.out / "trained")
    trained["method"] = trained["method"] + " (trained)"
    frame = pd.concat([runs(args.out / "fresh"), trained], ignore_index=True)
    gm = geomeans(frame)
    rng = np.random.default_rng(0)
    by = {m: g.set_index("seed")["log_gm"] for m, g in gm.groupby("method")}
    rows = []
    for method, series in by.items():
        m, lo, hi = t_ci(series.to_numpy())
        rows.append({"method": method, "seeds": len(series), "geomean": math.exp(m), "ci_lo": math.exp(lo),
                     "ci_hi": math.exp(hi), "oracle": method == "expert"})  # fmt: skip
    pairs = []
    for a in ["htam (trained)", "htam", "htam-no-prefix (trained)", "flat (trained)", "flat"]:
        for b in ["random", "feedback", "expert", "htam", "htam-no-prefix", "htam-no-prefix (trained)", "flat"]:
            if a == b or a not in by or b not in by:
                continue
            seeds = by[a].index.intersection(by[b].index)
            d = (by[a][seeds] - by[b][seeds]).to_numpy()
            m, lo, hi = boot_ci(d, rng)
            pairs.append({"a": a, "b": b, "seeds": len(seeds), "ratio": math.exp(m), "ci_lo": math.exp(lo),
                          "ci_hi": math.exp(hi), "excludes_1": not (lo <= 0 <= hi)})  # fmt: skip
    families = (
        frame.assign(best=frame["speedup"].where(frame["correct"], 1.0))
        .groupby(["family", "method"])["best"].apply(lambda s: float(np.exp(np.mean(np.log(s))))).unstack()
    )  # fmt: skip
    summary = {
        "protocol": __doc__.split("Protocol", 1)[1].split("    python", 1)[0].strip(),
        "table": str(args.table), "seeds": args.seeds, "steps": args.steps, "tau": args.tau,
        "train": args.train.read_text().split(), "test": args.test.read_text().split(),
        "methods": rows, "paired": pairs, "per_family": json.loads(families.to_json(orient="index")),
        "cpu_seconds_wall": round(time.monotonic() - began, 1),
    }  # fmt: skip
    (args.out / "memory-value.json").write_text(json.dumps(summary, indent=1))
    table = pd.DataFrame(rows).sort_values("geomean", ascending=False)
    paired = pd.DataFrame(pairs)
    text = [
        "# Memory value: HTAM against its controls on held-out tasks (replayed table)\n",
        f"table `{args.table}`; {args.seeds} seeds; T = {args.steps}; tau = {args.tau}; reward_from = parent; "
        f"{time.monotonic() - began:.0f} s on this machine\n",
        "## Geomean of the best speedup over eager, test tasks (mean over seeds, 95% t-CI); expert is an oracle\n",
        _markdown(table),
        "\n## Paired differences (ratio of geomeans, a / b; bootstrap 95% CI over seeds)\n",
        _markdown(paired),
        "\n## Per family (geomean over tasks and seeds)\n",
        _markdown(families.reset_index()),
    ]
    (args.out / "report.md").write_text("\n".join(text) + "\n")
    print("\n".join(text))


def _markdown(frame: pd.DataFrame) -> str:
    cell = lambda v: f"{v:.4f}" if isinstance(v, float) else str(v)
    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
