"""One conformance suite for every store (local SQLite and the real Neo4j)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from htam_graph.config import ScoringParams
from htam_graph.errors import BadInput, StoreStateError
from htam_graph.memory.models import (
    MAX_EVIDENCE,
    RunConfig,
    RunRecord,
    SimilarStep,
    StepUpdate,
    TaskRecord,
    similarity_weight,
)
from htam_graph.memory.outcome import FAILURE_COUNTER, STEP_VERDICTS
from htam_graph.memory.scoring import score_globals
from htam_graph.memory.seed import load_seed_bank
from htam_graph.memory.store import StepConflict
from htam_graph.vocab import Verdict

BANK = load_seed_bank()
STARTED = datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC)
G = [g.id for g in BANK.globals]
A_SHA, B_SHA = "a" * 64, "b" * 64  # parent kernels
LOCAL_OF = {g: next(loc.id for loc in BANK.locals if loc.global_ == g) for g in G}


def make_step(
    i: int, prefix: list[str], chosen: str, reward: float, run: str = "run-1", verdict: Verdict | None = None, **kw
) -> StepUpdate:
    """A step worth `reward`: ok with a speedup that raises the best by 2**reward (0: ok but
    no better), or, for -1, a failure (`verdict`, incorrect by default)."""
    verdict = verdict or (Verdict.OK if reward >= 0 else Verdict.INCORRECT)
    times: dict[str, float | None] = {"best_before": 1.0, "best_after": 1.0, "speedup": None}
    if verdict == Verdict.OK:
        speedup = 2.0**reward if reward > 0 else 0.9
        times = {"best_before": 1.0, "best_after": max(1.0, speedup), "speedup": speedup}
    step = StepUpdate(
        id=f"{run}:{i}",
        run_id=run,
        task_id="level1/1_Toy",
        index=i,
        prefix=prefix,
        global_id=chosen,
        local_id=LOCAL_OF[chosen],
        verdict=verdict,
        candidate_sha256=f"{i:064x}",
        note=f"step {i}",
        **times,
        **kw,
    )
    assert step.reward == pytest.approx(reward)
    return step


def seeded(store, run: str = "run-1"):
    store.seed(BANK)
    record = RunRecord(id=run, task_id="level1/1_Toy", config=RunConfig(steps=3), started_at=STARTED)
    store.start_run(record, TaskRecord(id="level1/1_Toy"))
    return store


def test_seed_is_idempotent_and_keeps_statistics(store):
    seeded(store)
    first = store.counts()
    assert (first["globals"], first["locals"]) == (len(BANK.globals), len(BANK.locals))
    store.record_step(make_step(0, [G[0]], G[1], 0.5))
    store.seed(BANK)
    assert store.counts() == {**first, "steps": 1}
    g1 = next(g for g in store.get_globals() if g.id == G[1])
    assert (g1.attempts, g1.successes) == (1, 1) and g1.reward_sum == pytest.approx(0.5)
    assert g1.intent == BANK.globals[1].intent


def test_step_updates_global_local_transitions_and_record(store):
    seeded(store)
    step = make_step(0, [G[0], G[2], G[0]], G[1], 0.5)
    assert store.record_step(step) is True
    g1 = next(g for g in store.get_globals() if g.id == G[1])
    assert (g1.attempts, g1.successes) == (1, 1) and g1.reward_sum == pytest.approx(0.5)
    assert g1.trend == pytest.approx(0.1)
    loc = next(x for x in store.get_locals(G[1]) if x.id == LOCAL_OF[G[1]])
    assert loc.attempts == 1 and [e.step_id for e in loc.positive] == [step.id] and loc.negative == []
    edges = {(t.source, t.target): t for t in store.get_transitions()}
    e0 = edges[(G[0], G[1])]
    assert e0.n_by_k[:3] == [1, 0, 1] and e0.reward_by_k[:3] == pytest.approx([0.5, 0.0, 0.5])
    assert (e0.n, e0.successes) == (2, 2) and (e0.reward_sum, e0.gain_sum) == pytest.approx((1.0, 1.0))
    e2 = edges[(G[2], G[1])]
    assert e2.n_by_k[:3] == [0, 1, 0] and e2.n == 1
    assert store.get_steps("run-1") == [step]


def test_replaying_a_step_changes_nothing(store):
    seeded(store)
    step = make_step(0, [G[0]], G[1], -1.0, verdict=Verdict.COMPILE_ERROR)
    assert store.record_step(step)
    before = store.export()
    assert store.record_step(step) is False
    assert store.export() == before
    g1 = next(g for g in before.globals if g.id == G[1])
    assert (g1.compile_failures, g1.incorrect, g1.successes) == (1, 0, 0)


def test_evidence_lists_are_bounded_newest_first(store):
    seeded(store)
    for i in range(MAX_EVIDENCE + 5):
        store.record_step(make_step(i, [], G[3], -1.0))
    loc = next(x for x in store.get_locals(G[3]) if x.id == LOCAL_OF[G[3]])
    assert len(loc.negative) == MAX_EVIDENCE
    assert loc.negative[0].step_id == f"run-1:{MAX_EVIDENCE + 4}"
    assert loc.incorrect == MAX_EVIDENCE + 5


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"global_id": "nope"}, "unknown global 'nope'"),
        ({"prefix": ["nope"]}, "unknown global 'nope'"),
        ({"local_id": "fusion.nope"}, "unknown local"),
        ({"run_id": "no-run"}, "unknown run"),
    ],
)
def test_bad_step_is_rejected_and_writes_nothing(store, bad, message):
    seeded(store)
    before = store.export()
    step = make_step(0, [G[0]], G[1], 0.5).model_copy(update=bad)
    with pytest.raises(BadInput, match=message) as err:
        store.record_step(step)
    assert err.value.value == (bad["prefix"][0] if "prefix" in bad else next(iter(bad.values())))
    assert store.export() == before


def test_local_must_belong_to_the_chosen_global(store):
    seeded(store)
    step = make_step(0, [], G[1], 0.5).model_copy(update={"local_id": LOCAL_OF[G[2]]})
    with pytest.raises(BadInput, match="belongs to"):
        store.record_step(step)


def test_score_matches_python_reference(store):
    seeded(store)
    for i, (prefix, chosen, r) in enumerate(
        [([G[0]], G[1], 0.5), ([G[1], G[0]], G[2], -1.0), ([G[2], G[1], G[0]], G[1], 0.25)]
    ):
        store.record_step(make_step(i, prefix, chosen, r))
    params = ScoringParams(K=3, lam=0.7, alpha=1.5, beta=0.3, tau=0.4)
    prefix = [G[2], G[1], G[0]]
    edges = {(t.source, t.target): t for t in store.get_transitions()}
    want = score_globals(store.get_globals(), edges, prefix, params)
    got = store.score(prefix, params)
    assert [s.global_id for s in got] == [s.global_id for s in want]
    for a, b in zip(got, want, strict=True):
        assert a.score == pytest.approx(b.score, abs=1e-12)
        assert a.transition == pytest.approx(b.transition, abs=1e-12)


def test_score_rejects_unknown_prefix_global(store):
    seeded(store)
    with pytest.raises(BadInput, match="unknown global 'bogus'"):
        store.score([G[0], "bogus"], ScoringParams())


def test_export_import_round_trip_is_exact(store, local_store, tmp_path):
    from htam_graph.memory.sqlite_store import SQLiteStore

    seeded(store)
    for i in range(6):
        store.record_step(make_step(i, [G[(i + j) % 4] for j in range(min(i, 3))], G[i % 5], [0.5, -1.0, 0.0][i % 3]))
    # reward_from = fastest: twice the fastest kernel (0.25x), still below eager, is worth 1
    below = make_step(6, [G[0]], G[1], 0.0).model_copy(update={"speedup": 0.5, "base_before": 0.25, "reward": 1.0})
    store.record_step(StepUpdate.model_validate(below.model_dump()))
    snap = store.export()
    assert len(snap.steps) == 7
    assert [(s.base_before, s.reward) for s in snap.steps if s.index == 6] == [(0.25, 1.0)]
    # Into the other backend (or a second local file), and back out: identical.
    target = local_store if store is not local_store else SQLiteStore(tmp_path / "other.sqlite")
    target.import_snapshot(snap)
    assert target.export() == snap
    assert target.score([G[0], G[1]], ScoringParams()) == store.score([G[0], G[1]], ScoringParams())


def test_import_refuses_a_non_empty_store(store):
    seeded(store)
    snap = store.export()
    with pytest.raises(StoreStateError, match="not empty; run `htam memory reset` first") as err:
        store.import_snapshot(snap)
    assert err.value.store == store.describe()


def test_reset_empties_everything(store):
    seeded(store)
    store.record_step(make_step(0, [], G[0], 0.0))
    store.reset()
    assert set(store.counts().values()) == {0}


def test_start_run_is_idempotent(store):
    seeded(store)
    again = RunRecord(id="run-1", task_id="level1/1_Toy", config=RunConfig(steps=5))
    store.start_run(again, TaskRecord(id="level1/1_Toy"))
    runs = store.get_runs()
    assert len(runs) == 1 and runs[0].config.steps == 3


@pytest.mark.neo4j
def test_backends_agree_after_the_same_steps(local_store, neo4j_store):
    """The step update is written twice (Python for SQLite, Cypher for Neo4j): same result."""
    steps = [
        make_step(
            i,
            [G[(i * 7 + j) % len(G)] for j in range(min(i, 4))],
            G[(i * 5) % len(G)],
            [0.75, -1.0, 0.0, 0.125][i % 4],
            verdict=[None, Verdict.COMPILE_ERROR, None, None][i % 4],
        )
        for i in range(12)
    ]
    for s in (local_store, neo4j_store):
        seeded(s)
        for step in steps:
            s.record_step(step)
    a, b = local_store.export(), neo4j_store.export()
    assert a.globals == b.globals and a.locals == b.locals
    assert a.transitions == b.transitions and a.steps == b.steps and a == b


@pytest.mark.neo4j
def test_neo4j_links_steps_for_browsing(neo4j_store):
    seeded(neo4j_store)
    for i in range(4):
        neo4j_store.record_step(make_step(i, [G[0]] if i else [], G[i], 0.5))
    records, _, _ = neo4j_store.driver.execute_query(
        "MATCH (r:Run {id: 'run-1'})-[:HAS_STEP]->(s:Step)-[:CHOSE_GLOBAL]->(:Global), "
        "(s)-[:CHOSE_LOCAL]->(:Local), (r)-[:ON_TASK]->(:Task) "
        "OPTIONAL MATCH (s)-[n:NEXT]->(:Step) RETURN count(DISTINCT s) AS steps, count(n) AS next",
        database_=neo4j_store.database,
    )
    assert (records[0]["steps"], records[0]["next"]) == (4, 3)


@pytest.mark.neo4j
def test_neo4j_import_failure_leaves_the_store_empty(neo4j_store, local_store, monkeypatch):
    import htam_graph.memory.neo4j_store as mod

    seeded(local_store)
    for i in range(5):
        local_store.record_step(make_step(i, [], G[i], 0.5))
    monkeypatch.setattr(mod, "BATCH", 2)  # several step batches, the second one fails
    real, calls = mod._import_batch, []

    def failing(tx, query, rows, token):
        calls.append(query)
        if calls.count("import_steps") == 2:
            raise RuntimeError("a bug mid-import")
        return real(tx, query, rows, token)

    monkeypatch.setattr(mod, "_import_batch", failing)
    with pytest.raises(RuntimeError, match="mid-import"):
        neo4j_store.import_snapshot(local_store.export())
    assert set(neo4j_store.counts().values()) == {0}
    assert neo4j_store.pending_operation() is None  # discarded by this process: nothing to recover


def test_every_verdict_gives_its_reward_and_moves_its_counter(store):
    """docs/method.md's verdict table, through each store: one step per verdict."""
    seeded(store)
    counted = dict.fromkeys(("successes", *set(FAILURE_COUNTER.values())), 0)
    for i, verdict in enumerate(sorted(STEP_VERDICTS)):
        reward = 0.5 if verdict == Verdict.OK else -1.0
        step = make_step(i, [G[0]], G[1], reward, verdict=verdict)
        assert store.record_step(step)
        counted["successes" if verdict == Verdict.OK else FAILURE_COUNTER[verdict]] += 1
        g1 = next(g for g in store.get_globals() if g.id == G[1])
        edge = next(t for t in store.get_transitions() if (t.source, t.target) == (G[0], G[1]))
        loc = next(x for x in store.get_locals(G[1]) if x.id == LOCAL_OF[G[1]])
        for record in (g1, edge, loc):
            assert {name: getattr(record, name) for name in counted} == counted, (verdict, record)
    steps = {s.verdict: s for s in store.get_steps("run-1")}
    assert steps[Verdict.OK].reward == pytest.approx(0.5)
    assert all(s.reward == -1.0 and s.speedup is None for v, s in steps.items() if v != Verdict.OK)
    g1 = next(g for g in store.get_globals() if g.id == G[1])
    assert g1.attempts == len(STEP_VERDICTS) and g1.reward_sum == pytest.approx(0.5 - (len(STEP_VERDICTS) - 1))


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"verdict": "rejected", "speedup": 2.0, "best_after": 2.0}, "speedups come only from ok"),
        ({"verdict": "rejected", "reward": 1.0}, "disagrees with verdict rejected"),
        ({"verdict": "ok", "speedup": 2.0, "best_before": 1.0, "best_after": 2.0, "reward": 0.5}, "disagrees"),
        ({"verdict": "ok", "speedup": 2.0, "best_before": 1.0, "best_after": 1.5}, "must be max"),
        ({"verdict": "ok"}, "needs the run's best speedup"),
        ({"verdict": "ok", "best_before": 1.0, "best_after": 2.0}, "without a trusted speedup cannot change the best"),
        ({"verdict": "checked"}, "not a step outcome"),
    ],
)
def test_a_step_whose_reward_disagrees_with_its_verdict_is_refused(bad, message):
    base = {"id": "s", "run_id": "r", "task_id": "t", "index": 0, "global_id": "fusion", "local_id": "fusion.x"}
    with pytest.raises(ValueError, match=message):
        StepUpdate.model_validate({**base, **bad})


def test_a_replayed_step_id_with_another_payload_is_an_error(store):
    seeded(store)
    step = make_step(0, [G[0]], G[1], 0.5)
    assert store.record_step(step)
    assert store.record_step(step.model_copy(update={"created_at": STARTED})) is False  # same step, later
    before = store.export()
    with pytest.raises(StepConflict, match="recorded before with other values"):
        store.record_step(make_step(0, [G[0]], G[1], -1.0))
    assert store.export() == before


def test_a_fresh_seed_already_ranks_by_the_transition_priors(store):
    """Seeded transitions carry a prior worth a few observations: S(g) differs from the
    base for the globals a seeded edge leads to, and real steps outweigh the prior."""
    seeded(store)
    params = ScoringParams()
    scores = {s.global_id: s for s in store.score(["memory_access", "fusion"], params)}
    led_to = {t.to for t in BANK.transitions if t.from_ in ("memory_access", "fusion")}
    for gid, s in scores.items():
        if gid in led_to:
            assert s.transition > s.base, gid  # every seeded prior in the bank is positive
        else:
            assert s.transition == pytest.approx(s.base), gid
    prior = next(t for t in BANK.transitions if (t.from_, t.to) == ("memory_access", "fusion")).prior
    for i in range(12):
        store.record_step(make_step(i, ["memory_access"], "fusion", -1.0))
    after = {s.global_id: s for s in store.score(["memory_access"], params)}["fusion"]
    assert after.transition < after.base < prior  # twelve failures outweigh two pseudo-observations


def test_a_step_without_a_direction_is_recorded_without_touching_the_htg(store):
    """Baselines (feedback, flat, vanilla) choose no global: only the step is recorded."""
    seeded(store)
    before = store.export()
    step = make_step(0, [], G[1], 0.5).model_copy(update={"global_id": None, "local_id": None})
    assert store.record_step(step)
    after = store.export()
    assert (after.globals, after.locals, after.transitions) == (before.globals, before.locals, before.transitions)
    assert store.get_steps("run-1") == [step]


def test_a_step_without_a_local_moves_the_global_and_its_edges_only(store):
    """htam-no-local chooses a global and no strategy."""
    seeded(store)
    locals_before = store.get_locals()
    step = make_step(0, [G[0]], G[1], 0.5).model_copy(update={"local_id": None})
    assert store.record_step(step)
    assert store.get_locals() == locals_before
    g1 = next(g for g in store.get_globals() if g.id == G[1])
    edge = next(t for t in store.get_transitions() if (t.source, t.target) == (G[0], G[1]))
    assert (g1.attempts, edge.n, edge.notes) == (1, 1, ["step 0"])


def test_transitions_keep_the_newest_notes(store):
    seeded(store)
    for i in range(MAX_EVIDENCE + 3):
        store.record_step(make_step(i, [G[0]], G[1], 0.0))
    edge = next(t for t in store.get_transitions() if (t.source, t.target) == (G[0], G[1]))
    assert edge.notes == [f"step {i}" for i in reversed(range(3, MAX_EVIDENCE + 3))]


def test_similar_steps_weigh_by_tier_and_rank_on_the_store(store):
    """The flat baseline's retrieval (docs/method.md, "flat"): every step of another run with
    its tier's weight (same task and parent kernel 1, same task 1/2, same family 1/4, other
    1/8), ranked by the store as the Python twin ranks every step; parent hash and change kept."""
    seeded(store, "run-1")
    tasks = {"run-1": ("level1/1_Toy", "elementwise"), "run-2": ("level1/2_Other", "elementwise"),
             "run-3": ("level1/1_Toy", "elementwise"), "run-4": ("level1/3_Gemm", "matmul"),
             "run-5": ("level1/4_Unknown", None)}  # fmt: skip
    for run, (task, family) in tasks.items():
        store.start_run(RunRecord(id=run, task_id=task, config=RunConfig(steps=3), started_at=STARTED),
                        TaskRecord(id=task, family=family))  # fmt: skip
    parents = [A_SHA, B_SHA, None]
    for n, run in enumerate(tasks):
        for i in range(3):
            step = make_step(i, [], G[i], [0.5, -1.0, 0.0][(i + n) % 3], run=run)
            change = f"+ change {run}:{i}"
            step = step.model_copy(
                update={"task_id": tasks[run][0], "parent_sha256": parents[(i + n) % 3], "change": change}
            )
            assert store.record_step(step)
    every = store.get_steps()
    assert {s.change for s in every} == {f"+ change {r}:{i}" for r in tasks for i in range(3)}
    families = dict(tasks.values())
    for task, family, parent, exclude, limit in (
        ("level1/1_Toy", "elementwise", A_SHA, "run-3", 20),
        ("level1/1_Toy", "elementwise", B_SHA, "run-1", 7),
        ("level1/1_Toy", None, None, "none", 20),
        ("level1/3_Gemm", "matmul", A_SHA, "run-4", 5),
    ):
        weighted = [
            (similarity_weight(s.task_id, s.parent_sha256, families[s.task_id], task, family, parent), s)
            for s in every
            if s.run_id != exclude
        ]
        expected = [
            SimilarStep(step=s, weight=w)
            for w, s in sorted(weighted, key=lambda ws: (-ws[0], ws[1].run_id, ws[1].index, ws[1].id))
        ]
        got = store.similar_steps(task, family, parent, exclude_run=exclude, limit=limit)
        assert got == expected[:limit]
    weights = {s.weight for s in store.similar_steps("level1/1_Toy", "elementwise", A_SHA, "none", 20)}
    assert weights == {1.0, 0.5, 0.25, 0.125}
