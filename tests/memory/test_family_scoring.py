"""Scores conditioned on the task's operator family (docs/method.md, "Conditioning on the
operator family"): a family without evidence scores exactly as the pooled evidence; the
family's evidence is shrunk toward the pooled, with the limits a shrinkage has; the Cypher
query in the real Neo4j and the Python reference agree to 1e-9; both stores derive the same
family evidence from their steps and give the same family-conditioned scores."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from htam_graph.config import ScoringParams
from htam_graph.memory.models import (
    GlobalNode,
    MemorySnapshot,
    RunConfig,
    RunRecord,
    StepUpdate,
    TaskRecord,
    Transition,
)
from htam_graph.memory.scoring import FamilyEvidence, Tally, base_utility, score_globals, shrink
from htam_graph.memory.sqlite_store import SQLiteStore
from htam_graph.vocab import Verdict
from tests.memory.test_scoring_property import graphs
from tests.memory.test_store_conformance import BANK, LOCAL_OF, STARTED, G

FAMILIES = ["elementwise", "matmul", "softmax"]


def pooled_case(case):
    snap, prefix, params = case
    return snap.globals, {(e.source, e.target): e for e in snap.transitions}, prefix, params


@st.composite
def evidence(draw, ids: list[str]) -> FamilyEvidence:
    """Random family evidence over `ids` (tallies with rewards within their counts)."""

    def tally() -> Tally:
        n = draw(st.integers(0, 40))
        return Tally(n=n, reward_sum=draw(st.floats(-n, n, allow_nan=False)))

    chosen = draw(st.lists(st.sampled_from(ids), unique=True))
    pairs = draw(st.lists(st.tuples(st.sampled_from(ids), st.sampled_from(ids)), unique=True))
    fam = FamilyEvidence(family="elementwise", globals={g: tally() for g in chosen})
    for source, target in pairs:
        fam.edges.setdefault(source, {})[target] = tally()
    return fam


@settings(max_examples=150, deadline=None)
@given(case=graphs())
def test_a_family_without_evidence_scores_exactly_as_the_pooled_evidence(case):
    globals_, edges, prefix, params = pooled_case(case)
    pooled = score_globals(globals_, edges, prefix, params)
    ids = [g.id for g in globals_]
    empty = FamilyEvidence(
        family="matmul",
        globals={g: Tally() for g in ids},
        edges={s: {t: Tally() for t in ids} for s in ids},
    )
    for family in (None, FamilyEvidence(), FamilyEvidence(family="matmul"), empty):
        assert score_globals(globals_, edges, prefix, params, family) == pooled  # exactly, not to 1e-9


@settings(max_examples=100, deadline=None)
@given(case=graphs(), data=st.data())
def test_the_family_base_lies_between_the_pooled_base_and_the_family_mean(case, data):
    globals_, edges, prefix, params = pooled_case(case)
    fam = data.draw(evidence([g.id for g in globals_]))
    for g, s in zip(globals_, score_globals(globals_, edges, prefix, params, fam), strict=True):
        b, t = base_utility(g, params.alpha), fam.global_tally(g.id)
        if t.n == 0:
            assert s.base == b
            continue
        mean = t.reward_sum / t.n
        assert min(b, mean) - 1e-12 <= s.base <= max(b, mean) + 1e-12
        assert abs(s.score - (params.beta * s.base + s.transition)) <= 1e-12


@given(
    pooled=st.floats(-1, 1, allow_nan=False),
    mean=st.floats(-1, 1, allow_nan=False),
    alpha=st.floats(0.05, 10, allow_nan=False),
)
def test_shrinkage_limits(pooled, mean, alpha):
    assert shrink(0.0, 0, pooled, alpha) == pooled  # no evidence: the prior itself
    many = 10**12
    assert shrink(mean * many, many, pooled, alpha) == pytest.approx(mean, abs=1e-9)  # evidence wins
    assert shrink(mean * 5, 5, pooled, 1e12) == pytest.approx(pooled, abs=1e-9)  # a strong prior wins
    one = shrink(mean, 1, pooled, alpha)
    assert one == pytest.approx((mean + alpha * pooled) / (1 + alpha))


def test_the_family_evidence_of_an_edge_is_shrunk_into_the_transition():
    """One global, one edge g -> g with no pooled evidence: U_1 = U0_f, which tends to the
    family's mean on the edge as its evidence grows, and is the pooled U0 without it."""
    g = GlobalNode(id="g", name="G", intent="", prior=0.2)
    edges = {("g", "g"): Transition(source="g", target="g")}
    params = ScoringParams(K=1, alpha=2.0, beta=0.0)
    pooled = score_globals([g], edges, ["g"], params)[0].transition
    assert pooled == pytest.approx(0.2)  # a missing edge's evidence: B(g), the prior
    for n, want in ((0, 0.2), (2, (2 * 0.9 + 2 * 0.2) / 4), (10**9, 0.9)):
        fam = FamilyEvidence(family="f", edges={"g": {"g": Tally(n=n, reward_sum=0.9 * n)}})
        assert score_globals([g], edges, ["g"], params, fam)[0].transition == pytest.approx(want, abs=1e-8)


# --- the stores ------------------------------------------------------------------------------


def family_memory(
    draw_family, draw_reward, steps: int = 24
) -> tuple[list[TaskRecord], list[RunRecord], list[StepUpdate]]:
    """Tasks of three families (and one without), a run each, and steps choosing globals with
    rewards 1, 0.5, 0 or -1, prefixes of up to 3 globals."""
    tasks = [TaskRecord(id=f"task-{i}", family=f) for i, f in enumerate([*FAMILIES, None, "elementwise"])]
    runs = [RunRecord(id=f"run-{t.id}", task_id=t.id, config=RunConfig(steps=steps), started_at=STARTED) for t in tasks]
    out: list[StepUpdate] = []
    for i in range(steps):
        run = runs[draw_family(i) % len(runs)]
        chosen = G[draw_reward(i, "g") % len(G)]
        prefix = [G[draw_reward(i, f"p{k}") % len(G)] for k in range(draw_reward(i, "k") % 4)]
        out.append(make(i, run, prefix, chosen, [1.0, 0.5, 0.0, -1.0][draw_reward(i, "r") % 4]))
    return tasks, runs, out


def make(i: int, run: RunRecord, prefix: list[str], chosen: str, reward: float) -> StepUpdate:
    if reward < 0:
        times: dict = {"verdict": Verdict.INCORRECT, "best_before": 1.0, "best_after": 1.0}
    elif reward == 0:
        times = {"verdict": Verdict.OK, "best_before": 1.0, "best_after": 1.0, "speedup": 0.9}
    else:
        times = {"verdict": Verdict.OK, "best_before": 1.0, "best_after": 2**reward, "speedup": 2**reward}
    return StepUpdate(
        id=f"{run.id}:{i}", run_id=run.id, task_id=run.task_id, index=i, prefix=prefix, global_id=chosen,
        local_id=LOCAL_OF.get(chosen) if i % 3 else None, **times,
    )  # fmt: skip


def fill(store, tasks, runs, steps) -> None:
    store.seed(BANK)
    for run in runs:
        store.start_run(run, next(t for t in tasks if t.id == run.task_id))
    for step in steps:
        store.record_step(step)


def draws(seed: int):
    import random

    rng = random.Random(seed)
    table: dict = {}

    def family(i: int) -> int:
        return table.setdefault(("f", i), rng.randrange(1000))

    def reward(i: int, what: str) -> int:
        return table.setdefault((i, what), rng.randrange(1000))

    return family, reward


def reference(store, steps: list[StepUpdate], tasks: list[TaskRecord], family: str | None) -> FamilyEvidence:
    of_family = {t.id for t in tasks if t.family == family and family is not None}
    return FamilyEvidence.of_steps(family, [s for s in steps if s.task_id in of_family])


def assert_same_scores(got, want) -> None:
    assert [s.global_id for s in got] == [s.global_id for s in want]
    for a, b in zip(got, want, strict=True):
        assert abs(a.base - b.base) <= 1e-9 and abs(a.transition - b.transition) <= 1e-9
        assert abs(a.score - b.score) <= 1e-9


PREFIXES = [[], [G[0]], [G[1], G[0], G[2]], [G[3], G[3]]]
PARAMS = [ScoringParams(), ScoringParams(K=2, lam=1.0, alpha=0.5, beta=1.5)]


def test_each_store_derives_the_family_evidence_from_its_steps_and_scores_with_it(store):
    tasks, runs, steps = family_memory(*draws(1))
    fill(store, tasks, runs, steps)
    assert {t.id: t.family for t in store.get_tasks()} == {t.id: t.family for t in tasks}
    globals_, edges = store.get_globals(), {(e.source, e.target): e for e in store.get_transitions()}
    for family in [*FAMILIES, "conv", None]:
        want = reference(store, steps, tasks, family)
        assert store.family_evidence(family).rounded() == want.rounded()
        for prefix in PREFIXES:
            for params in PARAMS:
                got = sorted(store.score(prefix, params, family), key=lambda s: s.global_id)
                ref = sorted(score_globals(globals_, edges, prefix, params, want), key=lambda s: s.global_id)
                assert_same_scores(got, ref)
    # a family with evidence moves the scores; one without gives the pooled scores
    pooled = store.score([G[0]], ScoringParams())
    assert store.score([G[0]], ScoringParams(), "conv") == pooled
    assert store.score([G[0]], ScoringParams(), "elementwise") != pooled


def test_a_task_recorded_without_a_family_gets_it_from_a_later_run(store):
    store.seed(BANK)
    store.start_run(RunRecord(id="r1", task_id="t", started_at=STARTED), TaskRecord(id="t"))
    store.start_run(RunRecord(id="r2", task_id="t", started_at=STARTED), TaskRecord(id="t", family="norm"))
    store.start_run(RunRecord(id="r3", task_id="t", started_at=STARTED), TaskRecord(id="t", family="conv"))
    assert [t.family for t in store.get_tasks()] == ["norm"]  # filled in once, then kept


@pytest.mark.neo4j
def test_both_stores_give_the_same_family_conditioned_scores(neo4j_store, tmp_path: Path):
    tasks, runs, steps = family_memory(*draws(7), steps=40)
    with SQLiteStore(tmp_path / "memory.sqlite") as local:
        fill(local, tasks, runs, steps)
        fill(neo4j_store, tasks, runs, steps)
        for family in [*FAMILIES, None]:
            assert local.family_evidence(family).rounded() == neo4j_store.family_evidence(family).rounded()
            for prefix in PREFIXES:
                for params in PARAMS:
                    assert_same_scores(neo4j_store.score(prefix, params, family), local.score(prefix, params, family))


@st.composite
def memories(draw):
    """A random graph (test_scoring_property.graphs) with tasks of families and their steps."""
    snap, prefix, params = draw(graphs())
    ids = [g.id for g in snap.globals]
    tasks = [TaskRecord(id=f"t{i}", family=f) for i, f in enumerate(["a", "b", None])]
    runs = [RunRecord(id=f"r{i}", task_id=t.id, started_at=STARTED) for i, t in enumerate(tasks)]
    steps = []
    for i in range(draw(st.integers(0, 30))):
        run = draw(st.sampled_from(runs))
        chosen = draw(st.sampled_from(ids))
        step_prefix = draw(st.lists(st.sampled_from(ids), max_size=4))
        steps.append(make(i, run, step_prefix, chosen, draw(st.sampled_from([1.0, 0.5, 0.25, 0.0, -1.0]))))
    full = MemorySnapshot(globals=snap.globals, transitions=snap.transitions, tasks=tasks, runs=runs, steps=steps)
    return full, prefix, params, draw(st.sampled_from(["a", "b", "c", None]))


@pytest.mark.neo4j
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=memories())
def test_cypher_family_scores_equal_python_reference(neo4j_store, case):
    snap, prefix, params, family = case
    neo4j_store.reset()
    neo4j_store.import_snapshot(snap)
    want = FamilyEvidence.of_steps(family, [s for s in snap.steps if family and s.run_id in _runs_of(snap, family)])
    assert neo4j_store.family_evidence(family).rounded() == want.rounded()
    got = {s.global_id: s for s in neo4j_store.score(prefix, params, family)}
    ref = score_globals(snap.globals, {(e.source, e.target): e for e in snap.transitions}, prefix, params, want)
    assert_same_scores([got[w.global_id] for w in ref], ref)
    assert all(math.isfinite(s.score) for s in ref)


def _runs_of(snap: MemorySnapshot, family: str) -> set[str]:
    tasks = {t.id for t in snap.tasks if t.family == family}
    return {r.id for r in snap.runs if r.task_id in tasks}
