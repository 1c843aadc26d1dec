"""Transition-attended scoring: the Python twin of cypher/score_globals.cypher.

    S(g)  = beta * B(g) + sum_{k=1..K'} a_k * U_k(p_k -> g)
    a_k   = exp(-lam*(k-1)) / sum_{j=1..K'} exp(-lam*(j-1))          K' = len(prefix)
    B(g)  = (reward_sum(g) + alpha * prior(g)) / (attempts(g) + alpha)
    U0(e) = (R(e) + m(e) * pi(e) + alpha * B(g)) / (n(e) + m(e) + alpha)   pooled
    U_k(e)= (R_k(e) + alpha * U0(e)) / (n_k(e) + alpha)                    at distance k

pi(e) is a seeded edge's prior utility and m(e) the pseudo-observations it is worth
(`prior`, `prior_n`); a missing edge has n = R = m = 0, so it contributes B(g).
docs/method.md has the definition; the Cypher query computes the same numbers inside
Neo4j (tested to 1e-9). The policy turns these scores into probabilities.
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
    if not known:
        raise UserError("the memory is empty: run `htam memory seed` first")
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
        for k, (p, a) in enumerate(zip(prefix, weights, strict=True)):
            e = edges.get((p, g.id))
            n, r, pseudo = (e.n, e.reward_sum, e.prior_n * e.prior) if e else (0, 0.0, 0.0)
            m = e.prior_n if e else 0.0
            nk, rk = (e.n_by_k[k], e.reward_by_k[k]) if e else (0, 0.0)
            u0 = (r + pseudo + params.alpha * b) / (n + m + params.alpha)
            attended += a * (rk + params.alpha * u0) / (nk + params.alpha)
        scores.append(
            GlobalScore(global_id=g.id, name=g.name, base=b, transition=attended, score=params.beta * b + attended)
        )
    return scores
