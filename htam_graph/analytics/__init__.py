"""Analytics of an HTG memory as pandas DataFrames: what `htam stats` prints and the
notebooks plot.

Every function takes an open store (`htam_graph.memory.open_store()`). On Neo4j the
tables are computed by the server (cypher/analytics/*.cypher); on the embedded store the
same numbers come from its records in Python (record_source.py). Definitions follow
docs/method.md: a *success* is a step that raised its run's best speedup (reward > 0),
its *gain* that positive reward; success rates carry a 95% Wilson score interval
(rates.py); `min_count` leaves out rows with fewer observations. docs/analytics.md shows
the tables.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, cast

import numpy as np
import pandas as pd

from htam_graph.analytics.cypher_source import CypherSource
from htam_graph.analytics.frames import FAILURES
from htam_graph.analytics.rates import Z95, wilson_interval, with_rates
from htam_graph.analytics.record_source import RecordSource
from htam_graph.config import ScoringParams
from htam_graph.errors import BadInput
from htam_graph.memory.store import MemoryStore

if TYPE_CHECKING:
    from htam_graph.memory.neo4j_store import Neo4jStore

__all__ = [
    "Z95",
    "compare_methods",
    "globals_",
    "history",
    "locals_",
    "runs",
    "trajectory",
    "transitions",
    "transitions_by_distance",
    "utilities",
    "wilson_interval",
]

log = logging.getLogger(__name__)

RATES = ["success_rate", "ci_low", "ci_high", "mean_reward"]


def _source(store: MemoryStore) -> CypherSource | RecordSource:
    """Where the tables are computed: by the Neo4j server, else in Python from the records."""
    source = CypherSource(cast("Neo4jStore", store)) if store.kind == "neo4j" else RecordSource(store)
    log.debug("analytics of %s by %s", store.describe(), type(source).__name__)
    return source


def _check_min_count(min_count: int) -> None:
    if min_count < 0:
        raise BadInput(f"min_count must be 0 or more, got {min_count}", option="--min-count", value=min_count)


def transitions(store: MemoryStore, min_count: int = 1) -> pd.DataFrame:
    """TRANSITION edges with at least `min_count` observations (pooled over prefix
    distances), best first: ranked by the lower end of the success rate's interval.

    Columns: source, target, observations, successes, success_rate, ci_low, ci_high,
    mean_reward, mean_gain, the failure counters, and the seeded prior (prior, prior_n)."""
    _check_min_count(min_count)
    raw = _source(store).transitions(min_count)
    df = with_rates(raw, "observations", gain=True)
    columns = ["source", "target", "observations", "successes", *RATES, "mean_gain", *FAILURES, "prior", "prior_n"]
    return _sorted(df[columns], ["ci_low", "observations", "source", "target"], [False, False, True, True])


def transitions_by_distance(store: MemoryStore, min_count: int = 1) -> pd.DataFrame:
    """Each edge's evidence at each prefix distance k (1: the previous step's global),
    from the steps that used it; rows with at least `min_count` observations.

    Columns: source, target, distance, observations, successes, success_rate, ci_low,
    ci_high, mean_reward, mean_gain."""
    _check_min_count(min_count)
    raw = _source(store).transitions_by_distance(min_count)
    df = with_rates(raw, "observations", gain=True)
    columns = ["source", "target", "distance", "observations", "successes", *RATES, "mean_gain"]
    return _sorted(df[columns], ["source", "target", "distance"])


def globals_(store: MemoryStore, min_count: int = 1) -> pd.DataFrame:
    """Global directions attempted at least `min_count` times, by id.

    Columns: id, name, prior, attempts, successes, success_rate, ci_low, ci_high,
    mean_reward, trend, the failure counters, locals (how many strategies it holds)."""
    _check_min_count(min_count)
    df = with_rates(_source(store).globals_(min_count), "attempts")
    columns = ["id", "name", "prior", "attempts", "successes", *RATES, "trend", *FAILURES, "locals"]
    return _sorted(df[columns], ["id"])


def locals_(store: MemoryStore, global_id: str | None = None, min_count: int = 1) -> pd.DataFrame:
    """Local strategies (of `global_id`, or all) attempted at least `min_count` times, by id.

    Columns: id, global_id, name, attempts, successes, success_rate, ci_low, ci_high,
    mean_reward, the failure counters, positive and negative (evidence entries kept)."""
    _check_min_count(min_count)
    df = with_rates(_source(store).locals_(global_id, min_count), "attempts")
    columns = ["id", "global_id", "name", "attempts", "successes", *RATES, *FAILURES, "positive", "negative"]
    return _sorted(df[columns], ["id"])


def runs(store: MemoryStore, min_count: int = 1) -> pd.DataFrame:
    """Runs with at least `min_count` steps, oldest first.

    Columns: run_id, task_id, method, seed, started_at, steps, ok (correct candidates),
    successes, success_rate, ci_low, ci_high, mean_reward (per step), best_speedup (the fastest
    correct candidate's, over eager PyTorch; NaN when none was correct), correct (some candidate was),
    llm (backend:model, "unrecorded" for runs stored before it was kept; with the catalog it names
    the start: catalog-space-v1 the task's base kernel, catalog-v1 the family's tuned first kernel),
    reward_from (scoring.reward_from: what a step's reward was measured against)."""
    columns = ["run_id", "task_id", "method", "seed", "started_at", "steps", "ok", "successes", *RATES]
    return _runs(store, min_count)[[*columns, "best_speedup", "correct", "llm", "reward_from"]]


def _runs(store: MemoryStore, min_count: int) -> pd.DataFrame:
    _check_min_count(min_count)
    df = with_rates(_source(store).runs(min_count), "steps").assign(correct=lambda d: d["ok"] > 0)
    return _sorted(df, ["started_at", "run_id"])


def trajectory(store: MemoryStore, run_id: str) -> pd.DataFrame:
    """One run's steps in order: index, global_id, local_id (empty where the method chose
    none), verdict, speedup (ok steps), reward, best_before, best_after, base_before (the
    reward's base where it was not best_before: the step's parent under the default
    scoring.reward_from = parent, the fastest kernel under fastest), created_at."""
    df = _source(store).trajectory(run_id)
    if df is None:
        raise BadInput(
            f"no run {run_id!r} in the memory at {store.describe()}; `htam stats runs` lists them",
            option="--run",
            value=run_id,
        )
    return _sorted(df, ["index"])


def compare_methods(store: MemoryStore, min_count: int = 0) -> pd.DataFrame:
    """Methods side by side over their runs with at least `min_count` steps (KernelBench's
    conventions, per run):
    runs, tasks, steps, correct (share of runs with a correct candidate), fast_1 (share
    faster than eager PyTorch), geomean_speedup (a run without a correct candidate counts
    1.0), and per step: successes, success_rate, ci_low, ci_high, mean_reward."""
    per_run = _runs(store, min_count).assign(
        faster=lambda d: d["best_speedup"] > 1.0, log_speedup=lambda d: np.log(d["best_speedup"].fillna(1.0))
    )
    grouped = per_run.groupby("method", sort=True)
    df = pd.DataFrame(
        {
            "runs": grouped.size(),
            "tasks": grouped["task_id"].nunique(),
            "steps": grouped["steps"].sum(),
            "correct": grouped["correct"].mean(),
            "fast_1": grouped["faster"].mean(),
            "geomean_speedup": np.exp(grouped["log_speedup"].mean()),
            "successes": grouped["successes"].sum(),
            "reward_sum": grouped["reward_sum"].sum(),
        }
    ).reset_index()
    return with_rates(df, "steps").drop(columns="reward_sum")


def history(store: MemoryStore, global_id: str) -> pd.DataFrame:
    """A global's record over time: every step that chose it, oldest first, with the
    running totals after it (attempts, successes, success_rate, ci_low, ci_high,
    mean_reward). Columns also: created_at, run_id, index, reward, success."""
    if global_id not in {g.id for g in store.get_globals()}:
        raise BadInput(f"no global {global_id!r} in the memory at {store.describe()}", value=global_id)
    raw = _sorted(_source(store).history(global_id), ["created_at", "run_id", "index"])
    success = raw["reward"] > 0
    running = raw.assign(
        success=success,
        attempts=np.arange(1, len(raw) + 1),
        successes=success.cumsum(),
        reward_sum=raw["reward"].cumsum(),
    )
    return with_rates(running, "attempts").drop(columns="reward_sum")


def utilities(store: MemoryStore, params: ScoringParams | None = None) -> pd.DataFrame:
    """The policy's utility of moving from each global (rows: the previous step's) to
    each next one (columns): U_1(source -> target) of docs/method.md, with the seeded
    priors and the shrinkage toward B(target), as the store's own scoring computes it."""
    params = params or ScoringParams()
    ids = [g.id for g in store.get_globals()]
    rows = {source: {s.global_id: s.transition for s in store.score([source], params)} for source in ids}
    return pd.DataFrame.from_dict(rows, orient="index")[ids].rename_axis(index="source", columns="target")


def _sorted(df: pd.DataFrame, by: list[str], ascending: list[bool] | None = None) -> pd.DataFrame:
    """Rows in a fixed order, whichever source computed them, numbered from 0."""
    return df.sort_values(by, ascending=ascending or True, na_position="last", kind="stable").reset_index(drop=True)
