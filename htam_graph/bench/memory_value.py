"""Does the memory earn its place? The train/test comparison of `htam bench --train --test`
(docs/method.md, "Comparing methods"): the statistics and the report, from the runs of the
three phases a comparison makes under its --out:

- fresh/: every method on the test tasks, each method and seed from the seed bank;
- train/: each memory method on the training tasks (seed s);
- trained/: each memory method on the test tasks, method and seed s starting from the memory
  its training phase left (train/memory/<method>-s<seed>.json): trained vs fresh is paired by seed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from htam_graph.bench.report import pipe_table

PROTOCOL = """\
- tasks: the --train and --test lists, disjoint (fixed before any outcome is seen);
- fresh: every method on the test tasks with a fresh seed-bank memory per method and seed (the
  memory carries over from task to task within a seed, as in every bench);
- trained: for each seed s, each memory method runs the training tasks (seed s), and its memory
  then runs the test tasks (seed s); trained vs fresh is paired by seed;
- metric: per method and seed, the geometric mean over test tasks of the best speedup over eager
  (a task without a correct kernel counts 1.0); mean and 95% t-CI over seeds, and paired
  differences of log geomeans with bootstrap 95% CIs (10,000 resamples of seeds, rng seed 0);
- expert is the catalog's hand-written order per family: an oracle, reported as one;
- ceiling (replay only): per test task the fastest correct kernel of the table within T strategies
  of the base kernel - the best any method can reach in T steps."""

# Student's t 0.975 quantiles by degrees of freedom (1..30; the normal's 1.96 beyond)
T975 = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
    2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
]  # fmt: skip
CONTROLS = ("random", "feedback", "flat", "expert")


def t_ci(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and its 95% t confidence interval."""
    m = float(np.mean(values))
    if len(values) < 2:
        return m, m, m
    q = T975[len(values) - 2] if len(values) - 1 <= len(T975) else 1.96
    h = float(q * np.std(values, ddof=1) / math.sqrt(len(values)))
    return m, m - h, m + h


def boot_ci(diffs: np.ndarray, rng: np.random.Generator, n: int = 10_000) -> tuple[float, float, float]:
    """Mean of paired differences and its 95% percentile-bootstrap interval over seeds."""
    means = rng.choice(diffs, size=(n, len(diffs)), replace=True).mean(axis=1)
    return float(np.mean(diffs)), float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def best_speedups(runs: pd.DataFrame) -> pd.Series:
    """Each run's best speedup over eager, 1.0 where it has no correct kernel."""
    return runs["speedup"].where(runs["correct"].astype(bool), 1.0).astype(float).clip(lower=1e-9)


def geomeans(runs: pd.DataFrame) -> pd.DataFrame:
    """Per method and seed: the log geomean over tasks of the best speedup."""
    f = runs.assign(best=np.log(best_speedups(runs)))
    return f.groupby(["method", "seed"])["best"].mean().reset_index(name="log_gm")


def ceiling(table: Path, tasks: list[str], steps: int) -> dict[str, float]:
    """Per task, the fastest correct kernel of the table within `steps` strategies of its base kernel."""
    t = pd.read_parquet(table, columns=["task_id", "depth", "verdict", "speedup_eager"])
    t = t[t["task_id"].isin(tasks) & (t["depth"] <= steps) & (t["verdict"] == "ok")]
    best = t.groupby("task_id")["speedup_eager"].max()
    return {task: float(max(best.get(task, 1.0), 1.0)) for task in tasks}


def compare(fresh: pd.DataFrame, trained: pd.DataFrame) -> dict[str, Any]:
    """Methods' geomeans with t-CIs and the paired differences that answer the question:
    each memory method (trained and fresh) against every control, the other memory methods,
    and its own fresh memory."""
    trained = trained.assign(method=trained["method"] + " (trained)")
    frame = pd.concat([fresh, trained], ignore_index=True)
    gm = geomeans(frame)
    by = {str(m): g.set_index("seed")["log_gm"] for m, g in gm.groupby("method")}
    rows = []
    for method, series in sorted(by.items()):
        m, lo, hi = t_ci(series.to_numpy())
        rows.append({"method": method, "seeds": len(series), "geomean": math.exp(m), "ci_lo": math.exp(lo),
                     "ci_hi": math.exp(hi), "oracle": method == "expert"})  # fmt: skip
    memory = sorted({str(m) for m in trained["method"]})
    baselines = [c for c in CONTROLS if c in by]
    rng = np.random.default_rng(0)
    pairs = []
    for a in memory:
        fresh_a = a.removesuffix(" (trained)")
        others = [m for m in memory if m != a]
        for b in dict.fromkeys([*baselines, fresh_a, *others]):  # flat is a control and a memory method
            if b not in by or a == b:
                continue
            seeds = by[a].index.intersection(by[b].index)
            m, lo, hi = boot_ci((by[a][seeds] - by[b][seeds]).to_numpy(), rng)
            pairs.append({"a": a, "b": b, "seeds": len(seeds), "ratio": math.exp(m), "ci_lo": math.exp(lo),
                          "ci_hi": math.exp(hi), "excludes_1": not (lo <= 0 <= hi)})  # fmt: skip
    families = (
        frame.assign(best=np.log(best_speedups(frame)))
        .groupby(["family", "method"])["best"].mean().apply(math.exp).unstack()
    )  # fmt: skip
    return {
        "methods": rows,
        "paired": pairs,
        "per_family": json.loads(families.to_json(orient="index")),
        "log_geomeans": {m: s.to_dict() for m, s in by.items()},
    }


def shares(result: dict[str, Any], top: dict[str, float]) -> dict[str, float]:
    """Each method's share of the ceiling's log-speedup (geomean over tasks): 1 = the ceiling."""
    best = float(np.mean(np.log(list(top.values()))))
    return {r["method"]: math.log(r["geomean"]) / best for r in result["methods"]} if best > 0 else {}


def write_report(out: Path, result: dict[str, Any], header: dict[str, Any]) -> Path:
    """memory-value.json (everything) and memory-value.md (the tables) under `out`."""
    (out / "memory-value.json").write_text(json.dumps({**header, **result}, indent=1))
    methods = pd.DataFrame(result["methods"])
    if "share_of_ceiling" in header:
        methods["share_of_ceiling"] = methods["method"].map(header["share_of_ceiling"])
    methods = methods.sort_values("geomean", ascending=False)
    lines = [
        "# Memory value: the memory methods against their controls on held-out tasks\n",
        "; ".join(f"{k} {v}" for k, v in header.items() if isinstance(v, (str, int, float))) + "\n",
        "## Protocol\n",
        PROTOCOL + "\n",
        "## Geomean of the best speedup over eager, test tasks (mean over seeds, 95% t-CI); expert is an oracle\n",
        markdown(methods),
    ]
    if "ceiling" in header:
        geo = math.exp(float(np.mean(np.log(list(header["ceiling"].values())))))
        lines += [f"\nCeiling (the best the table allows in T steps, geomean over test tasks): {geo:.4f}x\n"]
    lines += [
        "\n## Paired differences (ratio of geomeans, a / b; bootstrap 95% CI over seeds)\n",
        markdown(pd.DataFrame(result["paired"])),
        "\n## Per family (geomean over tasks and seeds)\n",
        markdown(pd.DataFrame(result["per_family"]).T.reset_index(names="family")),
    ]
    path = out / "memory-value.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def markdown(frame: pd.DataFrame) -> str:
    """The frame as the bench report's pipe table, floats to 4 decimals."""

    def cell(v: object) -> str:
        return f"{v:.4f}" if isinstance(v, float) else str(v)

    rows = [[cell(v) for v in row] for row in frame.itertuples(index=False)]
    return pipe_table([str(c) for c in frame.columns], rows)
