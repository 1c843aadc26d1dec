"""The raw analytics tables computed in Python from a store's records: the twin of
cypher/analytics/*.cypher for the embedded store (any MemoryStore works; a test checks
both give the same tables on the same memory)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pandas as pd

from htam_graph.analytics import frames
from htam_graph.memory.models import Counters, StepUpdate, best_step
from htam_graph.memory.store import MemoryStore
from htam_graph.vocab import Verdict


def _failures(record: Counters) -> dict[str, int]:
    return {name: getattr(record, name) for name in frames.FAILURES}


class RecordSource:
    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def transitions(self, min_count: int) -> pd.DataFrame:
        rows = (
            {
                "source": t.source,
                "target": t.target,
                "observations": t.n,
                "successes": t.successes,
                "reward_sum": t.reward_sum,
                "gain_sum": t.gain_sum,
                **_failures(t),
                "prior": t.prior,
                "prior_n": t.prior_n,
            }
            for t in self.store.get_transitions()
            if t.n >= min_count
        )
        return frames.frame(rows, frames.TRANSITIONS)

    def transitions_by_distance(self, min_count: int) -> pd.DataFrame:
        """A step with prefix p (most recent first) that chose g used p[k-1] -> g at distance k."""
        acc: dict[tuple[str, str, int], dict[str, Any]] = defaultdict(
            lambda: {"observations": 0, "successes": 0, "reward_sum": 0.0, "gain_sum": 0.0}
        )
        for s in self.store.get_steps():
            if s.global_id is None:
                continue
            for k, source in enumerate(s.prefix, start=1):
                row = acc[(source, s.global_id, k)]
                row["observations"] += 1
                row["successes"] += s.reward > 0
                row["reward_sum"] += s.reward
                row["gain_sum"] += max(s.reward, 0.0)
        rows = (
            {"source": source, "target": target, "distance": k, **row}
            for (source, target, k), row in acc.items()
            if row["observations"] >= min_count
        )
        return frames.frame(rows, frames.BY_DISTANCE)

    def globals_(self, min_count: int) -> pd.DataFrame:
        n_locals: dict[str, int] = defaultdict(int)
        for loc in self.store.get_locals():
            n_locals[loc.global_id] += 1
        rows = (
            {
                "id": g.id,
                "name": g.name,
                "prior": g.prior,
                "attempts": g.attempts,
                "successes": g.successes,
                "reward_sum": g.reward_sum,
                **_failures(g),
                "trend": g.trend,
                "locals": n_locals[g.id],
            }
            for g in self.store.get_globals()
            if g.attempts >= min_count
        )
        return frames.frame(rows, frames.GLOBALS)

    def locals_(self, global_id: str | None, min_count: int) -> pd.DataFrame:
        rows = (
            {
                "id": loc.id,
                "global_id": loc.global_id,
                "name": loc.name,
                "attempts": loc.attempts,
                "successes": loc.successes,
                "reward_sum": loc.reward_sum,
                **_failures(loc),
                "positive": len(loc.positive),
                "negative": len(loc.negative),
            }
            for loc in self.store.get_locals(global_id)
            if loc.attempts >= min_count
        )
        return frames.frame(rows, frames.LOCALS)

    def runs(self, min_count: int) -> pd.DataFrame:
        steps: dict[str, list[StepUpdate]] = defaultdict(list)
        for s in self.store.get_steps():
            steps[s.run_id].append(s)
        rows = (
            {
                "run_id": run.id,
                "task_id": run.task_id,
                "method": run.method.value,
                "seed": run.seed,
                "started_at": run.started_at,
                "steps": len(own),
                "ok": sum(s.verdict == Verdict.OK for s in own),
                "successes": sum(s.reward > 0 for s in own),
                "reward_sum": sum(s.reward for s in own),
                "best_speedup": best.speedup if (best := best_step(own)) is not None else None,
                **frames.run_setup(run.config),
            }
            for run in self.store.get_runs()
            if len(own := steps[run.id]) >= min_count
        )
        return frames.frame(rows, frames.RUNS)

    def trajectory(self, run_id: str) -> pd.DataFrame | None:
        if run_id not in {r.id for r in self.store.get_runs()}:
            return None  # no such run
        rows = (
            {
                "index": s.index,
                "global_id": s.global_id,
                "local_id": s.local_id,
                "verdict": s.verdict.value,
                "speedup": s.speedup,
                "reward": s.reward,
                "best_before": s.best_before,
                "best_after": s.best_after,
                "base_before": s.base_before,
                "created_at": s.created_at,
            }
            for s in self.store.get_steps(run_id)
        )
        return frames.frame(rows, frames.TRAJECTORY)

    def history(self, global_id: str) -> pd.DataFrame:
        rows = (
            {"created_at": s.created_at, "run_id": s.run_id, "index": s.index, "reward": s.reward}
            for s in self.store.get_steps()
            if s.global_id == global_id
        )
        return frames.frame(rows, frames.HISTORY)
