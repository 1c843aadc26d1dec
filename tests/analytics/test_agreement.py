"""The analytics of one memory are the same numbers whoever computes them: the Cypher
queries inside Neo4j, and the Python twin over the records of Neo4j or of the embedded
store, filled with the same steps."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from htam_graph import analytics
from htam_graph.analytics import cypher_source
from htam_graph.analytics.cypher_source import CypherSource
from htam_graph.analytics.record_source import RecordSource
from htam_graph.config import ScoringParams
from htam_graph.errors import BadInput
from htam_graph.memory.models import RunConfig, RunRecord, StepUpdate, TaskRecord
from htam_graph.memory.queries import checked
from htam_graph.memory.store import MemoryStore
from htam_graph.resources import resource_dir
from htam_graph.vocab import Method, Verdict
from tests.memory.test_store_conformance import BANK, G, make_step

ANALYTICS_QUERIES = sorted(f"analytics/{p.stem}" for p in (resource_dir("cypher") / "analytics").glob("*.cypher"))
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
RUNS = [("r-htam", Method.HTAM), ("r-noprefix", Method.HTAM_NO_PREFIX), ("r-feedback", Method.FEEDBACK)]
# what each run started from and was rewarded against (r-feedback: a run stored before the llm was kept)
SETUPS = {
    "r-htam": RunConfig(steps=7, llm="catalog:catalog-space-v1"),
    "r-noprefix": RunConfig(steps=7, llm="catalog:catalog-v1", scoring=ScoringParams(reward_from="best")),
    "r-feedback": RunConfig(steps=7),
}


def workload() -> Iterable[StepUpdate]:
    """Steps of every verdict, prefixes of every length up to 4 with repeated globals (an
    edge used at two distances), runs of three methods, one a baseline without globals."""
    failures = itertools.cycle([v for v in Verdict if v not in (Verdict.OK, Verdict.CHECKED)])
    runs = [
        ("r-htam", [G[0], G[1], G[0], G[2], G[1], G[3], G[0]], [0.5, -1.0, 0.0, 0.25, -1.0, 1.0, 0.125], 4),
        ("r-noprefix", [G[4], G[4], G[1]], [0.75, -1.0, -1.0], 1),
        ("r-feedback", [G[0], G[0]], [0.3, -1.0], 0),
    ]
    minute = 0
    for run, path, rewards, max_prefix in runs:
        for i, (chosen, reward) in enumerate(zip(path, rewards, strict=True)):
            verdict = next(failures) if reward < 0 else None
            step = make_step(i, path[:i][::-1][:max_prefix], chosen, reward, run=run, verdict=verdict)
            if run == "r-feedback":  # a baseline chooses no direction and touches nothing of the HTG
                step = step.model_copy(update={"global_id": None, "local_id": None})
            minute += 1
            yield step.model_copy(update={"created_at": T0 + timedelta(minutes=minute)})


def fill(store: MemoryStore) -> MemoryStore:
    store.seed(BANK)
    for i, (run_id, method) in enumerate(RUNS):
        record = RunRecord(
            id=run_id, task_id="level1/1_Toy", method=method, config=SETUPS[run_id], started_at=T0 + timedelta(i)
        )
        store.start_run(record, TaskRecord(id="level1/1_Toy"))
    for step in workload():
        assert store.record_step(step)
    return store


def tables(store: MemoryStore, source: CypherSource | RecordSource | None = None) -> dict[str, pd.DataFrame]:
    """Every public table of `store`, computed by `source` (by default the store's own)."""
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        if source is not None:
            mp.setattr(analytics, "_source", lambda _store: source)
        for min_count in (0, 3):
            out[f"transitions/{min_count}"] = analytics.transitions(store, min_count)
            out[f"by_distance/{min_count}"] = analytics.transitions_by_distance(store, min_count)
            out[f"globals/{min_count}"] = analytics.globals_(store, min_count)
            out[f"locals/{min_count}"] = analytics.locals_(store, min_count=min_count)
            out[f"runs/{min_count}"] = analytics.runs(store, min_count)
            out[f"methods/{min_count}"] = analytics.compare_methods(store, min_count)
        out["locals/one"] = analytics.locals_(store, G[1])
        for run_id, _ in RUNS:
            out[f"trajectory/{run_id}"] = analytics.trajectory(store, run_id)
        for g in (G[0], G[4], G[8]):
            out[f"history/{g}"] = analytics.history(store, g)
    return out


@pytest.mark.neo4j
def test_cypher_and_python_give_the_same_tables_on_neo4j_and_sqlite(neo4j_store, local_store, monkeypatch):
    ran: set[str] = set()

    def recording(name: str, given: Iterable[str]) -> str:
        ran.add(name)
        return checked(name, given)

    monkeypatch.setattr(cypher_source, "checked", recording)
    fill(neo4j_store)
    fill(local_store)
    by_cypher = tables(neo4j_store)  # the Neo4j store's own source: Cypher
    assert sorted(ran) == ANALYTICS_QUERIES  # every query file ran, with its declared parameters
    others = {"python on neo4j": tables(neo4j_store, RecordSource(neo4j_store)), "sqlite": tables(local_store)}
    for name, got in others.items():
        assert got.keys() == by_cypher.keys()
        for key, want in by_cypher.items():
            try:
                pd.testing.assert_frame_equal(got[key], want, check_exact=False, rtol=1e-12, atol=1e-12)
            except AssertionError as e:
                raise AssertionError(f"{name}, {key}: {e}") from None
    _check_content(by_cypher)


def _check_content(t: dict[str, pd.DataFrame]) -> None:
    """A few numbers worked out by hand, so agreement is not agreement on nonsense."""
    edges = t["transitions/0"].set_index(["source", "target"])
    # G0 -> G1 was used by step 1 at distance 1 (-1.0) and by step 4 at distances 2 and 4
    # (-1.0 twice): three observations, no success.
    e = edges.loc[(G[0], G[1])]
    assert (e["observations"], e["successes"], e["mean_reward"], e["mean_gain"]) == (3, 0, -1.0, 0.0)
    assert e["ci_high"] == pytest.approx(0.561497, abs=1e-6)
    by_k = t["by_distance/0"].set_index(["source", "target", "distance"])
    assert by_k.loc[(G[0], G[1]), "observations"].to_dict() == {1: 1, 2: 1, 4: 1}
    assert t["transitions/3"]["observations"].min() >= 3
    runs = t["runs/0"].set_index("run_id")
    assert runs[["llm", "reward_from"]].to_dict("index") == {
        "r-htam": {"llm": "catalog:catalog-space-v1", "reward_from": "parent"},
        "r-noprefix": {"llm": "catalog:catalog-v1", "reward_from": "best"},
        "r-feedback": {"llm": "unrecorded", "reward_from": "parent"},
    }
    assert runs.loc["r-htam", ["steps", "ok", "successes"]].tolist() == [7, 5, 4]
    assert runs.loc["r-noprefix", ["steps", "ok", "successes"]].tolist() == [3, 1, 1]
    assert t["runs/3"]["run_id"].tolist() == ["r-htam", "r-noprefix"]  # oldest first
    assert runs.loc["r-feedback", "best_speedup"] == pytest.approx(2**0.3)
    methods = t["methods/0"].set_index("method")
    assert methods.loc["feedback", ["runs", "steps", "correct", "fast_1"]].tolist() == [1, 2, 1.0, 1.0]
    assert t["trajectory/r-feedback"]["global_id"].isna().all()
    history = t[f"history/{G[0]}"]
    assert history["attempts"].tolist() == [1, 2, 3]
    assert history["successes"].tolist() == [1, 1, 2]
    assert t[f"history/{G[8]}"].empty


@pytest.mark.parametrize("call", [analytics.transitions, analytics.globals_, analytics.runs])
def test_a_negative_min_count_is_a_user_error(local_store, call):
    with pytest.raises(BadInput, match="min_count must be 0 or more") as err:
        call(local_store, -1)
    assert (err.value.option, err.value.value) == ("--min-count", -1)


def test_unknown_run_or_global_is_a_user_error(local_store):
    fill(local_store)
    with pytest.raises(BadInput, match="no run 'nope'.*`htam stats runs` lists them") as err:
        analytics.trajectory(local_store, "nope")
    assert (err.value.option, err.value.value) == ("--run", "nope")
    with pytest.raises(BadInput, match="no global 'nope'") as err:
        analytics.history(local_store, "nope")
    assert err.value.value == "nope"


def test_utilities_are_the_policys_distance_one_scores(local_store):
    fill(local_store)
    u = analytics.utilities(local_store)
    assert list(u.index) == list(u.columns) == [g.id for g in local_store.get_globals()]
    scores = {s.global_id: s.transition for s in local_store.score([G[0]], ScoringParams())}
    assert u.loc[G[0]].to_dict() == pytest.approx(scores)
