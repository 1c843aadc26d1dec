"""Transition-attended scoring: the Python twin of cypher/score_globals.cypher.

    S(g)    = beta * B_f(g) + sum_{k=1..K'} a_k * U_k(p_k -> g)
    a_k     = exp(-lam*(k-1)) / sum_{j=1..K'} exp(-lam*(j-1))          K' = len(prefix)
    B(g)    = (reward_sum(g) + alpha * prior(g)) / (attempts(g) + alpha)
    B_f(g)  = (R_f(g) + alpha * B(g)) / (n_f(g) + alpha)                  the task's family
    U0(e)   = (R(e) + m(e) * pi(e) + alpha * B_f(g)) / (n(e) + m(e) + alpha)   pooled
    U0_f(e) = (R_f(e) + alpha * U0(e)) / (n_f(e) + alpha)                 the task's family
    U_k(e)  = (R_k(e) + alpha * U0_f(e)) / (n_k(e) + alpha)               at distance k

pi(e) is a seeded edge's prior utility and m(e) the pseudo-observations it is worth
(`prior`, `prior_n`); a missing edge has n = R = m = 0, so it contributes B_f(g).
n_f, R_f: the steps of tasks of the run's operator family (FamilyEvidence, derived from
the step records); without a family, or before the family has evidence, n_f = R_f = 0 and
B_f = B, U0_f = U0: the pooled score exactly (`htam-no-family` always scores pooled).
docs/method.md has the definition; the Cypher query computes the same numbers inside
Neo4j (tested to 1e-9). The policy turns these scores into probabilities.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from pydantic import BaseModel, Field

from htam_graph.config import ScoringParams
from htam_graph.errors import BadInput, StoreStateError
from htam_graph.memory.models import GlobalNode, GlobalScore, StepUpdate, Transition


def shrink(reward_sum: float, n: int, toward: float, alpha: float) -> float:
    """(reward_sum + alpha * toward) / (n + alpha): a mean of n observations shrunk toward
    `toward`, worth alpha pseudo-observations; exactly `toward` when n = 0."""
    return toward if n == 0 else (reward_sum + alpha * toward) / (n + alpha)


class Tally(BaseModel):
    """n observations and their summed reward."""

    n: int = 0
    reward_sum: float = 0.0

    def add(self, count: int, reward: float) -> None:
        self.n += count
        self.reward_sum += count * reward


class FamilyEvidence(BaseModel):
    """The evidence of the steps of tasks of one operator family (TaskRecord.family): per
    chosen global n_f(g), R_f(g); per chosen local; per edge source -> target, n_f(e), R_f(e)
    over all prefix distances (a source at two distances counts twice, as the pooled edge
    evidence does). Derived from the step records (store.family_evidence)."""

    family: str | None = None
    globals: dict[str, Tally] = Field(default_factory=dict)
    locals: dict[str, Tally] = Field(default_factory=dict)
    edges: dict[str, dict[str, Tally]] = Field(default_factory=dict, description="source -> target -> tally")

    def add(self, global_id: str | None, local_id: str | None, prefix: list[str], reward: float) -> None:
        """One step (a step without a global adds nothing, as it adds nothing pooled)."""
        if global_id is None:
            return
        self.globals.setdefault(global_id, Tally()).add(1, reward)
        if local_id is not None:
            self.locals.setdefault(local_id, Tally()).add(1, reward)
        for source in prefix:
            self.edges.setdefault(source, {}).setdefault(global_id, Tally()).add(1, reward)

    @classmethod
    def of_steps(cls, family: str | None, steps: Iterable[StepUpdate]) -> FamilyEvidence:
        evidence = cls(family=family)
        for step in steps:
            evidence.add(step.global_id, step.local_id, step.prefix, step.reward)
        return evidence

    def global_tally(self, global_id: str) -> Tally:
        return self.globals.get(global_id) or Tally()

    def local_tally(self, local_id: str) -> Tally:
        return self.locals.get(local_id) or Tally()

    def edge_tally(self, source: str, target: str) -> Tally:
        return self.edges.get(source, {}).get(target) or Tally()

    def rounded(self, digits: int = 9) -> FamilyEvidence:
        """The same with reward sums rounded (two stores' float sums may differ in the last bits)."""

        def r(t: Tally) -> Tally:
            return Tally(n=t.n, reward_sum=round(t.reward_sum, digits))

        return FamilyEvidence(
            family=self.family,
            globals={k: r(t) for k, t in sorted(self.globals.items())},
            locals={k: r(t) for k, t in sorted(self.locals.items())},
            edges={s: {t: r(x) for t, x in sorted(ts.items())} for s, ts in sorted(self.edges.items())},
        )


def base_utility(g: GlobalNode, alpha: float) -> float:
    return (g.reward_sum + alpha * g.prior) / (g.attempts + alpha)


def attention_weights(prefix_len: int, lam: float) -> list[float]:
    raw = [math.exp(-lam * k) for k in range(prefix_len)]
    total = sum(raw)
    return [w / total for w in raw]


def check_prefix(prefix: list[str], known: Iterable[str]) -> None:
    known = set(known)
    if not known:
        raise StoreStateError("the memory is empty: run `htam memory seed` first")
    for p in prefix:
        if p not in known:
            raise BadInput(
                f"unknown global {p!r} in prefix; known globals: {', '.join(sorted(known))}", option="--prefix", value=p
            )


def score_globals(
    globals_: list[GlobalNode],
    edges: Mapping[tuple[str, str], Transition],
    prefix: list[str],
    params: ScoringParams,
    family: FamilyEvidence | None = None,
) -> list[GlobalScore]:
    """Scores of every global for `prefix` (p_1 first, truncated to K), in input order,
    conditioned on `family`'s evidence (None, or a family without evidence: pooled)."""
    check_prefix(prefix, (g.id for g in globals_))
    prefix = prefix[: params.K]
    weights = attention_weights(len(prefix), params.lam)
    fam = family if family is not None else FamilyEvidence()
    scores = []
    for g in globals_:
        ft = fam.global_tally(g.id)
        b = shrink(ft.reward_sum, ft.n, base_utility(g, params.alpha), params.alpha)
        attended = 0.0
        for k, (p, a) in enumerate(zip(prefix, weights, strict=True)):
            e = edges.get((p, g.id))
            n, r, pseudo = (e.n, e.reward_sum, e.prior_n * e.prior) if e else (0, 0.0, 0.0)
            m = e.prior_n if e else 0.0
            nk, rk = (e.n_by_k[k], e.reward_by_k[k]) if e else (0, 0.0)
            u0 = (r + pseudo + params.alpha * b) / (n + m + params.alpha)
            fe = fam.edge_tally(p, g.id)
            u0f = shrink(fe.reward_sum, fe.n, u0, params.alpha)
            attended += a * (rk + params.alpha * u0f) / (nk + params.alpha)
        scores.append(
            GlobalScore(global_id=g.id, name=g.name, base=b, transition=attended, score=params.beta * b + attended)
        )
    return scores
