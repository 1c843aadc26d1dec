"""Every Cypher query a user is told to paste (the user guide's, and the Browser's saved
queries, which its guide shows) runs on the real Neo4j holding a memory filled by real runs
(tests/analytics/conftest.py), and returns the rows the analytics compute: not just rows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from htam_graph import analytics

pytestmark = [pytest.mark.neo4j, pytest.mark.nvcc]  # the memory comes from real runs (conftest.py)

REPO = Path(__file__).parents[2]


def named_queries(text: str) -> dict[str, str]:
    """`// Name` then the query, up to its semicolon."""
    queries = {}
    for chunk in text.split(";"):
        lines = [line for line in chunk.strip().splitlines() if line.strip()]
        names = [line[3:].strip() for line in lines if line.startswith("// ")]
        body = "\n".join(line for line in lines if not line.startswith("//"))
        if body:
            queries[names[0]] = body
    return queries


def guide_queries() -> dict[str, str]:
    """The queries docs/usage.md shows (the README points there)."""
    blocks = re.findall(r"```cypher\n(.*?)```", (REPO / "docs" / "usage.md").read_text(), re.S)
    assert blocks, "the user guide shows Cypher queries"
    return {name: q for block in blocks for name, q in named_queries(block).items()}


def favourites() -> dict[str, str]:
    return named_queries((REPO / "docker" / "browser" / "favorites.cypher").read_text().split("\n\n", 1)[1])


def test_the_guide_queries_return_the_memorys_rows(filled_neo4j, _neo4j_session_store):
    store = _neo4j_session_store
    run = lambda q: [r.data() for r in store.driver.execute_query(q, database_=store.database).records]
    queries = guide_queries()
    assert len(queries) == 3, sorted(queries)
    names = {g.id: g.name for g in store.get_globals()}
    rates, glance, path = (queries[n] for n in sorted(queries, key=lambda n: ("success" not in n, "glance" not in n)))

    want = analytics.transitions(store)
    rows = run(rates)
    assert len(rows) == min(25, len(want)) > 0
    by_edge = want.set_index(["source", "target"])
    ids = {name: gid for gid, name in names.items()}
    for row in rows:
        edge = by_edge.loc[(ids[row["from"]], ids[row["to"]])]
        assert (row["observations"], row["success_rate"]) == (
            edge["observations"],
            pytest.approx(edge["success_rate"], abs=5e-4),
        )
        assert row["mean_reward"] == pytest.approx(edge["mean_reward"], abs=5e-4)
    assert [r["mean_reward"] for r in rows] == sorted((r["mean_reward"] for r in rows), reverse=True)

    assert len(run(glance)) == len(store.get_locals())

    newest = analytics.runs(store).sort_values("started_at").iloc[-1]
    steps = analytics.trajectory(store, newest["run_id"])
    rows = run(path)
    assert {r["run"] for r in rows} == {newest["run_id"]}  # one run, not every run's steps
    assert [r["step"] for r in rows] == list(range(1, len(steps) + 1))
    assert [r["verdict"] for r in rows] == steps["verdict"].tolist()
    assert [r["direction"] for r in rows] == [
        names.get(g) for g in steps["global_id"].where(steps["global_id"].notna(), None)
    ]


def test_the_browsers_saved_queries_return_the_memorys_rows(filled_neo4j, _neo4j_session_store):
    store = _neo4j_session_store
    run = lambda q: [r.data() for r in store.driver.execute_query(q, database_=store.database).records]
    q = favourites()
    guide = (REPO / "docker" / "browser" / "guide.html").read_text()
    for name in q:
        assert "{{query:" + name + "}}" in guide or name in guide, f"the guide does not show {name!r}"

    assert len(run(q["The HTG: globals and their strategies"])) == len(store.get_locals())
    edges = [t for t in store.get_transitions() if t.n > 0]
    assert len(run(q["The HTG: transitions with evidence"])) == len(edges) > 0

    want = analytics.transitions(store).set_index(["source", "target"])
    rows = run(q["Transition success rates"])
    assert len(rows) == min(50, len(want))
    for row in rows:
        edge = want.loc[(row["source"], row["target"])]
        assert [row["observations"], row["success_rate"], row["ci_low"], row["ci_high"]] == pytest.approx(
            [edge["observations"], edge["success_rate"], edge["ci_low"], edge["ci_high"]], abs=5e-4
        )

    by_k = analytics.transitions_by_distance(store).set_index(["source", "target", "distance"])
    rows = run(q["Transitions by prefix distance"])
    assert len(rows) == len(by_k) > 0
    for row in rows:
        assert row["observations"] == by_k.loc[(row["source"], row["target"], row["k"]), "observations"]

    globals_ = analytics.globals_(store, min_count=0).set_index("id")
    rows = run(q["Global directions"])
    assert {r["global"]: r["attempts"] for r in rows} == globals_["attempts"].to_dict()

    # The runs slide shows every method's newest run, a baseline's steps with what it does
    # instead of a direction (never null).
    runs = analytics.runs(store).sort_values("started_at")
    newest = runs.groupby("method").tail(1).set_index("method")
    assert set(newest.index) == {"htam", "htam-no-prefix", "feedback"}
    paths = run(q["The newest run of each method as a path"])
    rows = run(q["The newest run of each method, step by step"])
    assert sorted({r["method"] for r in rows}) == sorted(newest.index)
    assert len(paths) == len(rows)
    for method, first in newest.iterrows():
        steps = analytics.trajectory(store, first["run_id"])
        mine = [r for r in rows if r["method"] == method]
        assert {r["run"] for r in mine} == {first["run_id"]}
        assert [r["step"] for r in mine] == list(range(1, len(steps) + 1))
        assert [r["verdict"] for r in mine] == steps["verdict"].tolist()
        chose = steps["global_id"].fillna("").tolist()
        assert [r["global"] for r in mine] == [g or mine[0]["global"] for g in chose]
    assert all(r["global"] and r["local"] for r in rows)
    assert {r["global"] for r in rows if r["method"] == "feedback"} == {
        "(none: refines the last kernel from its feedback)"
    }

    # The first slide's picture: a run that chose directions, every kind of node in it.
    picture = store.driver.execute_query(q["The graph on real nodes"], database_=store.database).records
    shown = [path for record in picture for path in (record["p"], record["q"]) if path is not None]
    assert {label for path in shown for node in path.nodes for label in node.labels} == {
        "Task", "Run", "Step", "Global", "Local"
    }  # fmt: skip
    (run_id,) = {path.nodes[1]["id"] for path in (record["p"] for record in picture)}
    assert analytics.runs(store).set_index("run_id").loc[run_id, "method"] != "feedback"
    assert len(picture) == len(analytics.trajectory(store, run_id))

    methods = analytics.compare_methods(store).set_index("method")
    rows = run(q["Methods compared"])
    assert [r["method"] for r in rows] == sorted(methods.index)
    for row in rows:
        m = methods.loc[row["method"]]
        assert [row["runs"], row["correct"], row["geomean_speedup"], row["steps"]] == pytest.approx(
            [m["runs"], m["correct"], m["geomean_speedup"], m["steps"]], abs=5e-4
        )
