"""8 processes hammer the same edges at once: no increment may be lost, no step applied twice."""

from __future__ import annotations

import multiprocessing as mp

import pytest

from htam_graph.memory.models import RunRecord, StepUpdate, TaskRecord
from htam_graph.memory.seed import load_seed_bank
from htam_graph.vocab import Verdict

WORKERS = 8
STEPS = 25  # per worker
PREFIX = ["memory_access", "fusion", "memory_access"]
CHOSEN = "data_reuse"


def _settings_for(kind: str, path: str):
    from htam_graph.config import Settings
    from tests.conftest import neo4j_settings

    return neo4j_settings() if kind == "neo4j" else Settings(store="local", local_path=path)


def _hammer(kind: str, path: str, worker: int) -> int:
    from htam_graph.memory import open_store

    local = next(loc.id for loc in load_seed_bank().locals if loc.global_ == CHOSEN)
    applied = 0
    with open_store(_settings_for(kind, path)) as store:
        for i in range(STEPS):
            # Each worker also replays its neighbour's step ids: those must not count twice.
            for owner in (worker, (worker + 1) % WORKERS):
                step = StepUpdate(
                    id=f"w{owner}:{i}",
                    run_id="run-c",
                    task_id="t",
                    index=owner * STEPS + i,
                    prefix=PREFIX,
                    global_id=CHOSEN,
                    local_id=local,
                    verdict=Verdict.OK,
                    speedup=2**0.5,
                    best_before=1.0,
                    best_after=2**0.5,
                )
                applied += store.record_step(step)
    return applied


@pytest.mark.parametrize("kind", ["local", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def test_concurrent_writers_lose_no_increments(kind, request, tmp_path):
    store = request.getfixturevalue(f"{kind}_store")
    store.seed(load_seed_bank())
    store.start_run(RunRecord(id="run-c", task_id="t"), TaskRecord(id="t"))
    path = str(getattr(store, "path", ""))
    with mp.get_context("spawn").Pool(WORKERS) as pool:
        applied = pool.starmap(_hammer, [(kind, path, w) for w in range(WORKERS)])
    total = WORKERS * STEPS
    assert sum(applied) == total  # every step id applied exactly once
    g = next(g for g in store.get_globals() if g.id == CHOSEN)
    assert (g.attempts, g.successes) == (total, total) and g.reward_sum == pytest.approx(0.5 * total)
    edges = {(t.source, t.target): t for t in store.get_transitions()}
    ma = edges[("memory_access", CHOSEN)]
    assert ma.n_by_k[:3] == [total, 0, total] and ma.reward_by_k[:3] == pytest.approx([0.5 * total, 0.0, 0.5 * total])
    assert ma.n == 2 * total
    fu = edges[("fusion", CHOSEN)]
    assert fu.n_by_k[:3] == [0, total, 0] and fu.n == total
    assert store.counts()["steps"] == total
