"""Transition-attended scoring: the pure-Python reference of HTAM.md's definition.

    S(g)  = beta * B(g) + sum_{k=1..K'} a_k * U_k(p_k -> g)
    a_k   = exp(-lam*(k-1)) / sum_{j=1..K'} exp(-lam*(j-1))          K' = len(prefix)
    B(g)  = (reward_sum(g) + alpha * prior(g)) / (attempts(g) + alpha)
    U0(e) = (R(e) + alpha * B(g)) / (n(e) + alpha)                     pooled over distances
    U_k(e)= (R_k(e) + alpha * U0(e)) / (n_k(e) + alpha)                 at distance k

A missing edge has n = R = 0, so it contributes U0 = U_k = B(g). The Cypher query in
cypher/score_globals.cypher computes the same numbers inside Neo4j (tested to 1e-9).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from htam_graph.config import ScoringParams
from htam_graph.errors import UserError
from htam_graph.memory.models import GlobalNode, GlobalScore, Transition


def base_utility(g: GlobalNode, alpha: float) -> float:
    return (g.reward_sum + alpha * g.prior) / (g.attempts + alpha)


def attention_weights(prefix_len: int, lam: float) -> list[float]:
    raw = [math.exp(-lam * k) for k in range(prefix_len)]
    total = sum(raw)
    return [w / total for w in raw]


def check_prefix(prefix: list[str], known: Iterable[str]) -> None:
    known = set(known)
    for p in prefix:
        if p not in known:
            raise UserError(f"unknown global {p!r} in prefix; known globals: {', '.join(sorted(known))}")


def score_globals(
    globals_: list[GlobalNode],
    edges: Mapping[tuple[str, str], Transition],
    prefix: list[str],
    params: ScoringParams,
) -> list[GlobalScore]:
    """Scores of every global for `prefix` (p_1 first, truncated to K), in input order."""
    check_prefix(prefix, (g.id for g in globals_))
    prefix = prefix[: params.K]
    weights = attention_weights(len(prefix), params.lam)
    scores = []
    for g in globals_:
        b = base_utility(g, params.alpha)
        attended = 0.0
        for k, (p, a) in enumerate(zip(prefix, weights)):
            e = edges.get((p, g.id))
            n, r = (e.n, e.reward_sum) if e else (0, 0.0)
            nk, rk = (e.n_by_k[k], e.reward_by_k[k]) if e else (0, 0.0)
            u0 = (r + params.alpha * b) / (n + params.alpha)
            attended += a * (rk + params.alpha * u0) / (nk + params.alpha)
        scores.append(
            GlobalScore(
                global_id=g.id,
                name=g.name,
                base=b,
                transition=attended,
                score=params.beta * b + attended,
            )
        )
    return with_probabilities(scores, params.tau)


def with_probabilities(scores: list[GlobalScore], tau: float) -> list[GlobalScore]:
    """Softmax policy P(g) = softmax(S(g) / tau), computed stably."""
    if not scores:
        return scores
    top = max(s.score for s in scores)
    exps = [math.exp((s.score - top) / tau) for s in scores]
    total = sum(exps)
    return [s.model_copy(update={"probability": e / total}) for s, e in zip(scores, exps)]


def step_reward(compiled: bool, correct: bool, best_before: float, best_after: float) -> float:
    """HTAM.md's reward: clip(log2(best_after/best_before), -1, 1) for a correct candidate,
    -1 for a compile failure or a wrong result (speedups are relative to the reference)."""
    if not (compiled and correct):
        return -1.0
    if best_after <= best_before:
        return 0.0
    return max(-1.0, min(1.0, math.log2(best_after / best_before)))
