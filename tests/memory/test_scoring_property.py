"""Property: the Cypher scoring query in the real Neo4j and the Python reference agree
to 1e-9 on random graphs, prefixes and parameters."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from htam_graph.config import ScoringParams
from htam_graph.memory.models import MAX_DISTANCE, GlobalNode, MemorySnapshot, Transition
from htam_graph.memory.scoring import score_globals

IDS = [f"g{i}" for i in range(9)]
finite = {"allow_nan": False, "allow_infinity": False}


@st.composite
def graphs(draw):
    ids = IDS[: draw(st.integers(2, len(IDS)))]
    globals_ = []
    for gid in ids:
        attempts = draw(st.integers(0, 60))
        globals_.append(
            GlobalNode(
                id=gid,
                name=gid.upper(),
                intent="random",
                prior=draw(st.floats(-1, 1, **finite)),
                attempts=attempts,
                reward_sum=draw(st.floats(-attempts, attempts, **finite)),
            )
        )
    pairs = draw(st.sets(st.tuples(st.sampled_from(ids), st.sampled_from(ids)), max_size=len(ids) ** 2))
    edges = []
    for source, target in sorted(pairs):
        n_by_k = draw(st.lists(st.integers(0, 25), min_size=MAX_DISTANCE, max_size=MAX_DISTANCE))
        reward_by_k = [draw(st.floats(-n, n, **finite)) for n in n_by_k]
        edges.append(
            Transition(
                prior=draw(st.floats(-1, 1, **finite)),
                prior_n=draw(st.sampled_from([0.0, 0.5, 2.0, draw(st.floats(0, 20, **finite))])),
                source=source,
                target=target,
                n=sum(n_by_k),
                reward_sum=sum(reward_by_k),
                n_by_k=n_by_k,
                reward_by_k=reward_by_k,
            )
        )
    prefix = draw(st.lists(st.sampled_from(ids), max_size=MAX_DISTANCE))
    params = ScoringParams(
        K=draw(st.integers(1, MAX_DISTANCE)),
        lam=draw(st.floats(0, 3, **finite)),
        alpha=draw(st.floats(0.05, 10, **finite)),
        beta=draw(st.floats(0, 2, **finite)),
        tau=draw(st.floats(0.05, 5, **finite)),
    )
    return MemorySnapshot(globals=globals_, transitions=edges), prefix, params


@pytest.mark.neo4j
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=graphs())
def test_cypher_scores_equal_python_reference(neo4j_store, case):
    snap, prefix, params = case
    neo4j_store.reset()
    neo4j_store.import_snapshot(snap)
    got = {s.global_id: s for s in neo4j_store.score(prefix, params)}
    want = score_globals(snap.globals, {(e.source, e.target): e for e in snap.transitions}, prefix, params)
    assert sorted(got) == sorted(w.global_id for w in want)
    for w in want:
        g = got[w.global_id]
        assert abs(g.base - w.base) <= 1e-9
        assert abs(g.transition - w.transition) <= 1e-9
        assert abs(g.score - w.score) <= 1e-9
