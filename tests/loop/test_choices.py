"""Choices the loop makes without the LLM: htam-no-hierarchy's offer of strategies."""

from __future__ import annotations

import random

from htam_graph.loop.optimizer import HIERARCHY_FREE_LOCALS, hierarchy_free_locals
from htam_graph.loop.state import LocalView
from htam_graph.memory.seed import load_seed_bank
from htam_graph.policy.policy import SoftmaxPolicy

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
