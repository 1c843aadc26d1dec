"""The metrics of docs/method.md ("Metrics") over a bench's runs table, per method and
seed, then over seeds.

One run per task, method and seed; a task's value is its run's best correct candidate
(the ok step with the highest speedup over eager; it may be slower than eager):

- correct: the share of tasks with a correct candidate (fast_0);
- fast_p: the share of tasks with a correct candidate faster than p x eager (fast_1 of
  one run per task is Fast@1);
- geomean: the geometric mean of the speedups over all tasks, a task without a correct
  candidate counting 1.0 (the reference is kept); geomean_correct: over correct tasks only;
- the same two against torch.compile, over the tasks where it was timed (a correct task
  whose torch.compile was not timed is left out; a failed task counts 1.0);
- cost per task: tokens in (billed at the base rate), out, cache reads and writes, dollars
  (unknown when a model has no price).

`policy` summarises, over the steps table, how sharply each method's policy drew;
`unseen_progress` how many ok steps made a run's fastest kernel faster with reward 0.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

FAST_P = (1.0, 1.5, 2.0)
COST = ["cost_usd", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"]
METRICS = [
    "tasks",
    "correct",
    *(f"fast_{p:g}" for p in FAST_P),
    "geomean",
    "geomean_correct",
    "compile_timed",
    "geomean_compile",
    "geomean_compile_correct",
    *COST,
]


def geomean(values: pd.Series) -> float:
    """exp(mean(log x)); NaN for no values."""
    return float(np.exp(np.log(values.to_numpy(dtype=float)).mean())) if len(values) else math.nan


def fast_p(runs: pd.DataFrame, p: float) -> float:
    """The share of the runs' tasks with a correct candidate faster than p x eager."""
    return float((runs["correct"] & (runs["speedup"] > p)).mean())


def task_metrics(runs: pd.DataFrame) -> dict[str, float]:
    """Every metric over one run per task (one method and seed)."""
    correct = runs["correct"].astype(bool)
    eager = runs["speedup"].where(correct)
    compiled = runs["speedup_compile"].where(correct)
    timed = ~correct | compiled.notna()
    row: dict[str, float] = {
        "tasks": len(runs),
        "correct": float(correct.mean()),
        **{f"fast_{p:g}": fast_p(runs, p) for p in FAST_P},
        "geomean": geomean(eager.fillna(1.0)),
        "geomean_correct": geomean(eager.dropna()),
        "compile_timed": int(compiled.notna().sum()),
        "geomean_compile": geomean(compiled[timed].fillna(1.0)) if compiled.notna().any() else math.nan,
        "geomean_compile_correct": geomean(compiled.dropna()),
    }
    for name in COST:
        row[name] = float(runs[name].mean(skipna=False))  # one unknown price makes the mean unknown
    return row


def per_seed(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per method and seed, methods in the order they first appear."""
    rows = [
        {"method": method, "seed": seed, **task_metrics(group)}
        for (method, seed), group in runs.groupby(["method", "seed"], sort=False)
    ]
    return pd.DataFrame(rows, columns=["method", "seed", *METRICS])


def per_family(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per operator family and method: the metrics over the family's tasks, the mean
    over seeds. A `supported` row per method covers every family but `unsupported` (the
    tasks the strategy catalog has a kernel for) when some task is unsupported."""
    groups = [(family, group) for family, group in runs.groupby("family", sort=True)]
    if "unsupported" in runs["family"].values and len(groups) > 1:
        groups.append(("supported", runs[runs["family"] != "unsupported"]))
    rows = []
    for family, group in groups:
        seeds = per_seed(group)
        for method, mine in seeds.groupby("method", sort=False):
            rows.append({"family": family, "method": method, **mine.drop(columns=["method", "seed"]).mean().to_dict()})
    return pd.DataFrame(rows, columns=["family", "method", *METRICS])


def finished_everywhere(runs: pd.DataFrame, planned_per_task: int) -> pd.DataFrame:
    """The runs of the tasks whose every planned run (each method and seed) finished: in a
    partial bench, the tasks on which the methods compare like for like."""
    counts = runs.groupby("task_id").size()
    return runs[runs["task_id"].isin(counts[counts == planned_per_task].index)]


def per_method(seeds: pd.DataFrame) -> pd.DataFrame:
    """The mean of every metric over seeds, with its standard deviation (`<metric>_std`,
    NaN for one seed) and the number of seeds."""
    grouped = seeds.drop(columns="seed").groupby("method", sort=False)
    mean, std = grouped.mean(), grouped.std(ddof=1).add_suffix("_std")
    table = pd.concat([mean, std], axis=1)
    table.insert(0, "seeds", grouped.size())
    return table.reset_index()


def fast_p_curve(runs: pd.DataFrame, ps: np.ndarray) -> pd.DataFrame:
    """fast_p at every p of `ps`, per method and seed (the report's curve)."""
    rows = [
        {"method": method, "seed": seed, "p": float(p), "fast_p": fast_p(group, float(p))}
        for (method, seed), group in runs.groupby(["method", "seed"], sort=False)
        for p in ps
    ]
    return pd.DataFrame(rows)


def policy(steps: pd.DataFrame) -> pd.DataFrame:
    """Per method whose policy drew globals: the steps drawn, the mean probability of the
    drawn global, the mean normalised entropy of the draws (1.0: uniform over what could be
    drawn) and the median spread of the drawable globals' scores."""
    columns = ["method", "steps_drawn", "p_chosen", "draw_entropy", "score_spread"]
    if "p_chosen" not in steps or steps["p_chosen"].isna().all():
        return pd.DataFrame(columns=columns)
    drawn = steps[steps["p_chosen"].notna()]
    grouped = drawn.groupby("method", sort=False)
    return pd.DataFrame(
        {
            "steps_drawn": grouped.size(),
            "p_chosen": grouped["p_chosen"].mean(),
            "draw_entropy": grouped["draw_entropy"].mean(),
            "score_spread": grouped["score_spread"].median(),
        }
    ).reset_index()[columns]


PROGRESS = 1.02  # a step made the run's fastest correct kernel this much faster, or more


def unseen_progress(steps: pd.DataFrame) -> pd.DataFrame:
    """Per method: the ok steps, those rewarded (reward > 0), and those that made the run's
    fastest correct kernel so far over 2% (and over 1.5x) faster with reward 0. The reward
    is the gain in the run's best speedup, which starts at the reference's 1.0
    (docs/method.md, "Reward and counters"), so progress below eager is invisible to it."""
    ok = steps[steps["verdict"] == "ok"].sort_values(["run_id", "index"])
    fastest = ok.groupby("run_id")["speedup"].transform(lambda s: s.cummax().shift())  # before each step; NaN first
    unseen = (ok["reward"] == 0) & (ok["speedup"] > PROGRESS * fastest)
    table = (
        ok.assign(rewarded=ok["reward"] > 0, unseen=unseen, over=unseen & (ok["speedup"] > 1.5 * fastest))
        .groupby("method")
        .agg(steps_ok=("run_id", "size"), rewarded=("rewarded", "sum"), unrewarded_progress=("unseen", "sum"),
             unrewarded_over_1_5x=("over", "sum"))
    )  # fmt: skip
    order = [m for m in dict.fromkeys(steps["method"]) if m in table.index]
    return table.loc[order].reset_index()
