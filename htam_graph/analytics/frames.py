"""The raw tables both sources produce (Cypher in Neo4j, Python over any store's records):
their columns and types, fixed here so the two give identical DataFrames."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from htam_graph.memory.models import RunConfig
from htam_graph.memory.outcome import COUNTER_NAMES

Schema = Mapping[str, str]
DATETIME = "datetime64[us, UTC]"

# Outcome counters besides successes: one per way a step can fail (memory/outcome.py).
FAILURES = tuple(name for name in COUNTER_NAMES if name != "successes")
_FAILURE_COLUMNS = dict.fromkeys(FAILURES, "int64")

TRANSITIONS: Schema = {
    "source": "str",
    "target": "str",
    "observations": "int64",
    "successes": "int64",
    "reward_sum": "float64",
    "gain_sum": "float64",
    **_FAILURE_COLUMNS,
    "prior": "float64",
    "prior_n": "float64",
}
BY_DISTANCE: Schema = {
    "source": "str",
    "target": "str",
    "distance": "int64",
    "observations": "int64",
    "successes": "int64",
    "reward_sum": "float64",
    "gain_sum": "float64",
}
GLOBALS: Schema = {
    "id": "str",
    "name": "str",
    "prior": "float64",
    "attempts": "int64",
    "successes": "int64",
    "reward_sum": "float64",
    **_FAILURE_COLUMNS,
    "trend": "float64",
    "locals": "int64",
}
LOCALS: Schema = {
    "id": "str",
    "global_id": "str",
    "name": "str",
    "attempts": "int64",
    "successes": "int64",
    "reward_sum": "float64",
    **_FAILURE_COLUMNS,
    "positive": "int64",
    "negative": "int64",
}
RUNS: Schema = {
    "run_id": "str",
    "task_id": "str",
    "method": "str",
    "seed": "int64",
    "started_at": DATETIME,
    "steps": "int64",
    "ok": "int64",
    "successes": "int64",
    "reward_sum": "float64",
    "best_speedup": "float64",
    "llm": "str",
    "reward_from": "str",
}
TRAJECTORY: Schema = {
    "index": "int64",
    "global_id": "str",
    "local_id": "str",
    "verdict": "str",
    "speedup": "float64",
    "reward": "float64",
    "best_before": "float64",
    "best_after": "float64",
    "base_before": "float64",
    "created_at": DATETIME,
}
HISTORY: Schema = {
    "created_at": DATETIME,
    "run_id": "str",
    "index": "int64",
    "reward": "float64",
}


def run_setup(config: RunConfig) -> dict[str, str]:
    """What a run started from and was rewarded against, as the runs table shows them: its
    llm (backend:model; with the catalog, catalog-space-v1 starts from the task's base kernel,
    catalog-v1 from the family's tuned first kernel) and scoring.reward_from."""
    return {"llm": config.llm or "unrecorded", "reward_from": config.scoring.reward_from}


def frame(rows: Iterable[Mapping[str, Any]], schema: Schema) -> pd.DataFrame:
    """A DataFrame of exactly `schema`'s columns and types (None becomes NaN)."""
    return pd.DataFrame.from_records(list(rows), columns=list(schema)).astype(dict(schema))
