"""The Python reference of transition-attended scoring, checked by hand-computed cases."""

from __future__ import annotations

import math

import pytest

from htam_graph.config import ScoringParams
from htam_graph.errors import BadInput
from htam_graph.memory.models import GlobalNode, Transition
from htam_graph.memory.scoring import attention_weights, score_globals


def node(gid: str, prior: float = 0.0, attempts: int = 0, reward_sum: float = 0.0) -> GlobalNode:
    return GlobalNode(id=gid, name=gid, intent="", prior=prior, attempts=attempts, reward_sum=reward_sum)


def edge(
    source: str, target: str, n_by_k: list[int], reward_by_k: list[float], prior: float = 0.0, prior_n: float = 0.0
) -> Transition:
    pad = 8 - len(n_by_k)
    return Transition(
        source=source,
        target=target,
        prior=prior,
        prior_n=prior_n,
        n=sum(n_by_k),
        reward_sum=sum(reward_by_k),
        n_by_k=n_by_k + [0] * pad,
        reward_by_k=reward_by_k + [0.0] * pad,
    )


def test_hand_computed_example():
    a, b = node("a", prior=0.2, attempts=2, reward_sum=1.0), node("b", prior=-0.5)
    e = edge("a", "b", [2, 1], [1.0, -1.0])  # a->b: twice at distance 1, once at distance 2
    params = ScoringParams(K=3, lam=1.0, alpha=2.0, beta=0.5, tau=0.5)
    got = {s.global_id: s for s in score_globals([a, b], {("a", "b"): e}, ["a", "a"], params)}
    w1, w2 = 1 / (1 + math.exp(-1)), math.exp(-1) / (1 + math.exp(-1))
    b_b = (0 + 2 * -0.5) / (0 + 2)  # -0.5: unvisited, keeps its prior
    u0 = (0.0 + 2 * b_b) / (3 + 2)
    u1, u2 = (1.0 + 2 * u0) / (2 + 2), (-1.0 + 2 * u0) / (1 + 2)
    assert got["b"].base == pytest.approx(b_b)
    assert got["b"].score == pytest.approx(0.5 * b_b + w1 * u1 + w2 * u2)
    b_a = (1.0 + 2 * 0.2) / (2 + 2)
    assert got["a"].score == pytest.approx(0.5 * b_a + b_a)  # no a->a edge: contributes B(a)


def test_a_seeded_prior_counts_as_pseudo_observations():
    a, b = node("a"), node("b", prior=0.1)
    params = ScoringParams(K=1, alpha=2.0, beta=0.5)
    fresh = edge("a", "b", [], [], prior=0.4, prior_n=2.0)
    got = score_globals([a, b], {("a", "b"): fresh}, ["a"], params)[1]
    u0 = (0 + 2.0 * 0.4 + 2.0 * 0.1) / (0 + 2.0 + 2.0)  # (R + m*pi + alpha*B) / (n + m + alpha)
    assert got.transition == pytest.approx(u0)  # n_k = 0: U_1 = U0
    observed = edge("a", "b", [6], [-6.0], prior=0.4, prior_n=2.0)
    got = score_globals([a, b], {("a", "b"): observed}, ["a"], params)[1]
    u0 = (-6.0 + 0.8 + 0.2) / (6 + 2.0 + 2.0)
    assert got.transition == pytest.approx((-6.0 + 2.0 * u0) / (6 + 2.0))


def test_prefix_is_truncated_to_K_and_empty_prefix_scores_base_only():
    a, b = node("a", prior=0.3), node("b")
    params = ScoringParams(K=1, beta=1.0)
    e = {("b", "a"): edge("b", "a", [0, 5], [0.0, -5.0])}  # distance 2 only: beyond K=1
    assert score_globals([a, b], e, ["a", "b"], params) == score_globals([a, b], {}, ["a", "b"], params)
    empty = {s.global_id: s for s in score_globals([a, b], e, [], params)}
    assert empty["a"].score == pytest.approx(0.3) and empty["a"].transition == 0.0


def test_attention_weights_decay_and_normalise():
    w = attention_weights(3, 0.5)
    assert sum(w) == pytest.approx(1.0) and w[0] > w[1] > w[2]
    assert attention_weights(4, 0.0) == [0.25] * 4


def test_unknown_prefix_global_is_rejected():
    with pytest.raises(BadInput, match="unknown global 'zz'") as err:
        score_globals([node("a")], {}, ["zz"], ScoringParams())
    assert (err.value.option, err.value.value) == ("--prefix", "zz")
