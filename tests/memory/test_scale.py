"""Bounded memory and bounded transactions, at sizes a test can afford: the batch and page
sizes are made tiny so that a small memory takes the same many-transaction paths that
10^6 steps take (bench/bench_memory.py measures those). And concurrent writers that take
locks in one order never deadlock, so the server never has to retry them."""

from __future__ import annotations

import logging
import multiprocessing as mp
import random

import pytest

from htam_graph.memory import neo4j_store, sqlite_store
from htam_graph.memory.models import RunRecord, StepUpdate, TaskRecord
from htam_graph.memory.seed import load_seed_bank
from htam_graph.vocab import Verdict
from tests.memory.test_store_conformance import LOCAL_OF, G, make_step, seeded


@pytest.fixture
def tiny_batches(monkeypatch):
    monkeypatch.setattr(neo4j_store, "BATCH", 3)
    monkeypatch.setattr(neo4j_store, "PAGE", 2)
    monkeypatch.setattr(neo4j_store, "RUN_PAGE", 2)
    monkeypatch.setattr(sqlite_store, "BATCH", 3)


def test_import_export_and_reset_in_many_small_transactions(store, tiny_batches):
    for r in range(5):
        seeded(store, f"run-{r}")
        for i in range(4):
            store.record_step(
                make_step(i, [G[(r + j) % 6] for j in range(min(i, 3))], G[(r * 3 + i) % 9], 0.25, run=f"run-{r}")
            )
    snap = store.export()
    assert len(snap.runs) == 5 and len(snap.steps) == 20
    assert [s.id for s in store.get_steps()] == [s.id for s in snap.steps]  # paged in (run, index, id) order
    store.reset()
    assert set(store.counts().values()) == {0} and store.pending_operation() is None
    store.import_snapshot(snap)
    assert store.export() == snap
    assert store.get_steps("run-3") == [s for s in snap.steps if s.run_id == "run-3"]
    store.reset()
    assert set(store.counts().values()) == {0}


WRITERS = 8
STEPS = 20  # per writer
# Few globals, so that most steps create or update the same edges in different orders.
HOT = ["memory_access", "fusion", "data_reuse", "parallelism"]


def _writer(worker: int) -> tuple[int, int]:
    """Records STEPS steps with random prefixes; returns (steps applied, retries logged)."""
    from htam_graph.memory import open_store
    from tests.conftest import neo4j_settings

    logged: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = logged.append  # type: ignore[method-assign]
    logger = logging.getLogger("htam_graph.memory.neo4j_store")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)  # retries are logged at INFO
    rng = random.Random(worker)
    applied = 0
    with open_store(neo4j_settings()) as store:
        for i in range(STEPS):
            chosen = rng.choice(HOT)
            step = StepUpdate(
                id=f"w{worker}:{i}",
                run_id=f"run-{worker}",
                task_id="t",
                index=i,
                prefix=rng.sample(HOT, 3),
                global_id=chosen,
                local_id=LOCAL_OF[chosen],
                verdict=Verdict.OK,
                speedup=2.0,
                best_before=1.0,
                best_after=2.0,
            )
            applied += store.record_step(step)
    return applied, len([r for r in logged if "retry" in r.getMessage()])


@pytest.mark.neo4j
def test_writers_on_overlapping_edges_never_deadlock(neo4j_store):
    """Every step locks its global and the sources of edges it creates in id order, then
    its run: with 8 writers creating and updating the same 16 edges, no lock wait ever
    turns into a deadlock (the server would abort one writer and the store retry it,
    logging a warning), and no increment is lost."""
    neo4j_store.seed(load_seed_bank())
    for w in range(WRITERS):
        neo4j_store.start_run(RunRecord(id=f"run-{w}", task_id="t"), TaskRecord(id="t"))
    with mp.get_context("spawn").Pool(WRITERS) as pool:
        results = pool.map(_writer, range(WRITERS))
    assert sum(applied for applied, _ in results) == WRITERS * STEPS
    assert sum(retries for _, retries in results) == 0
    total = WRITERS * STEPS
    globals_ = {g.id: g for g in neo4j_store.get_globals()}
    assert sum(globals_[g].attempts for g in HOT) == total
    edges = [t for t in neo4j_store.get_transitions() if t.source in HOT and t.target in HOT]
    assert sum(t.n for t in edges) == 3 * total  # three prefix entries per step
    assert sum(t.successes for t in edges) == 3 * total and sum(t.n_by_k[0] for t in edges) == total
    assert neo4j_store.counts()["steps"] == total
