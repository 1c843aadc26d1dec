"""Choices the loop makes without the LLM: htam-no-hierarchy's offer of strategies, flat's
choice from its retrieved steps."""

from __future__ import annotations

import random

import pytest

from htam_graph.loop.optimizer import HIERARCHY_FREE_LOCALS, flat_choice, flat_values, hierarchy_free_locals
from htam_graph.loop.state import LocalView
from htam_graph.memory.models import SimilarStep, StepUpdate
from htam_graph.memory.seed import load_seed_bank
from htam_graph.policy.policy import SoftmaxPolicy
from htam_graph.vocab import Verdict

LOCALS = load_seed_bank().local_nodes()


def _views(rewarded: dict[str, tuple[int, float]] | None = None) -> list[LocalView]:
    """The seed bank's locals as the loop sees them; `rewarded`: id -> (attempts, reward sum)."""
    out = []
    for loc in LOCALS:
        attempts, total = (rewarded or {}).get(loc.id, (0, 0.0))
        out.append(LocalView.of(loc.model_copy(update={"attempts": attempts, "reward_sum": total})))
    return out


def test_a_fresh_memory_offers_other_strategies_at_other_steps_and_runs() -> None:
    offers = {
        (run, step): [v.id for v in hierarchy_free_locals(_views(), 2.0, SoftmaxPolicy(0, run, 0.5).rng(step, "h"))]
        for run in ("run-a", "run-b")
        for step in range(4)
    }
    assert all(len(ids) == HIERARCHY_FREE_LOCALS for ids in offers.values())
    assert len({tuple(ids) for ids in offers.values()}) == len(offers)  # no two draws offer the same list
    first = sorted(v.id for v in _views())[:HIERARCHY_FREE_LOCALS]
    assert [sorted(ids) for ids in offers.values()].count(first) <= 1  # not the alphabetical head every time
    again = hierarchy_free_locals(_views(), 2.0, SoftmaxPolicy(0, "run-a", 0.5).rng(2, "h"))
    assert [v.id for v in again] == offers[("run-a", 2)]  # reproducible from (seed, run, step)


def test_a_strategy_with_a_record_is_offered_first_whatever_the_draw() -> None:
    good, bad = LOCALS[7].id, LOCALS[3].id
    views = _views({good: (3, 2.4), bad: (3, -3.0)})
    for seed in range(5):
        offer = [v.id for v in hierarchy_free_locals(views, 2.0, random.Random(seed))]
        assert offer[0] == good and bad not in offer


def _similar(n: int, local_id: str | None, reward: float, weight: float) -> SimilarStep:
    ok = reward >= 0
    speedup = (2.0**reward if reward > 0 else 0.9) if ok else None
    step = StepUpdate(
        id=f"run-x:{n}", run_id="run-x", task_id="level1/1_Toy", index=n,
        global_id=local_id.split(".")[0] if local_id else None, local_id=local_id,
        verdict=Verdict.OK if ok else Verdict.INCORRECT, speedup=speedup,
        best_before=1.0, best_after=max(1.0, speedup or 1.0), reward=reward,
    )  # fmt: skip
    return SimilarStep(step=step, weight=weight)


def test_flat_values_weigh_each_step_by_its_similarity_and_shrink_by_alpha() -> None:
    similar = [_similar(0, "a.x", 1.0, 1.0), _similar(1, "a.x", -1.0, 0.125), _similar(2, "b.y", 0.5, 0.5),
               _similar(3, None, 1.0, 1.0)]  # fmt: skip
    values = flat_values(similar, alpha=2.0)
    assert values == pytest.approx(
        {"a.x": (1.0 - 0.125) / (1.125 + 2.0), "b.y": 0.25 / 2.5}
    )  # a step without a strategy: none


def test_flat_chooses_the_best_valued_strategy_on_offer_ties_drawn_by_the_run() -> None:
    similar = [_similar(0, "a.x", 1.0, 0.25), _similar(1, "b.y", -1.0, 1.0), _similar(2, "c.z", 0.5, 1.0)]
    rng = SoftmaxPolicy(0, "run-a", 0.5).rng
    assert flat_choice(["a.x", "b.y", "c.z"], similar, 2.0, rng(0, "flat")) == "c.z"  # 0.5/3 > 0.25/2.25
    assert flat_choice(["a.x", "b.y"], similar, 2.0, rng(0, "flat")) == "a.x"  # c.z is not on offer
    # an untried strategy (V = 0) beats one with a negative record; ties among untried ones are drawn
    pool = ["b.y", "d.0", "d.1", "d.2", "d.3"]
    picks = {
        flat_choice(pool, similar, 2.0, SoftmaxPolicy(0, run, 0.5).rng(s, "flat")) for run in "abcd" for s in range(4)
    }
    assert "b.y" not in picks and len(picks) > 1
    again = {flat_choice(pool, similar, 2.0, SoftmaxPolicy(0, "a", 0.5).rng(1, "flat")) for _ in range(3)}
    assert len(again) == 1  # reproducible from (seed, run, step)
