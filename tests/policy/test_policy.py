"""The softmax policy: stable probabilities and reproducible, independent draws."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from htam_graph.memory.models import GlobalScore
from htam_graph.policy.policy import SoftmaxPolicy, with_probabilities


def scores(*pairs: tuple[str, float]) -> list[GlobalScore]:
    return [GlobalScore(global_id=g, base=0, transition=0, score=s) for g, s in pairs]


def test_softmax_is_stable_for_large_scores():
    probs = [s.probability for s in with_probabilities(scores(("a", 1000.0), ("b", 999.0)), tau=0.5)]
    assert probs[0] == pytest.approx(1 / (1 + math.exp(-2)))


def test_draws_are_reproducible_and_follow_the_probabilities():
    given = scores(("a", 0.0), ("b", 0.5))
    policy = SoftmaxPolicy(seed=11, run_id="run-a", tau=0.5)
    draws = [policy.choose(given, i).global_id for i in range(4000)]
    assert draws == [SoftmaxPolicy(seed=11, run_id="run-a", tau=0.5).choose(given, i).global_id for i in range(4000)]
    share_b = Counter(draws)["b"] / len(draws)
    assert share_b == pytest.approx(with_probabilities(given, 0.5)[1].probability, abs=0.03)


def test_runs_with_the_same_seed_draw_independently():
    """Same seed, other run ids (other tasks or methods): the draws must not be the same."""
    given = scores(*[(f"g{i}", 0.0) for i in range(9)])
    first = [SoftmaxPolicy(seed=0, run_id="task-a", tau=0.5).choose(given, i).global_id for i in range(50)]
    other = [SoftmaxPolicy(seed=0, run_id="task-b", tau=0.5).choose(given, i).global_id for i in range(50)]
    assert first != other
    agree = sum(a == b for a, b in zip(first, other, strict=True)) / len(first)
    assert agree < 0.4  # 1/9 expected for independent uniform draws


def test_an_empty_memory_has_nothing_to_choose():
    with pytest.raises(ValueError, match="htam memory seed"):
        SoftmaxPolicy(seed=0, run_id="r", tau=0.5).choose([], 0)
