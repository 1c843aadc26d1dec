"""The softmax policy over global directions, reproducible from a seed."""

from __future__ import annotations

import math
import random
from collections.abc import Collection

from htam_graph.memory.models import GlobalScore


def with_probabilities(
    scores: list[GlobalScore], tau: float, offered: Collection[str] | None = None
) -> list[GlobalScore]:
    """P(g) = softmax(S(g) / tau), computed stably (the largest score is subtracted first),
    over the globals in `offered`; the others get P(g) = 0. None, or a set naming none of
    the scored globals, offers all of them."""
    if not scores:
        return scores
    drawable = {s.global_id for s in _drawable(scores, offered)}
    top = max(s.score for s in scores if s.global_id in drawable)
    exps = [math.exp((s.score - top) / tau) if s.global_id in drawable else 0.0 for s in scores]
    total = sum(exps)
    return [s.model_copy(update={"probability": e / total}) for s, e in zip(scores, exps, strict=True)]


def _drawable(scores: list[GlobalScore], offered: Collection[str] | None) -> list[GlobalScore]:
    if offered is None:
        return scores
    return [s for s in scores if s.global_id in offered] or scores


class SoftmaxPolicy:
    """Samples a global from the softmax of its scores.

    Each draw's RNG is derived from (seed, run id, step index) rather than kept as one
    stream: a resumed run draws exactly what the uninterrupted run would have drawn at the
    same step, and two runs with the same seed (other tasks, other methods) draw
    independently.
    """

    def __init__(self, seed: int, run_id: str, tau: float) -> None:
        self.seed, self.run_id, self.tau = seed, run_id, tau

    def rng(self, step_index: int, purpose: str = "global") -> random.Random:
        return random.Random(f"{self.seed}:{self.run_id}:{step_index}:{purpose}")

    def choose(self, scores: list[GlobalScore], step_index: int, offered: Collection[str] | None = None) -> GlobalScore:
        """One global drawn from P(g); only those in `offered` can be drawn (see
        with_probabilities). Without `offered` the draw is the policy's original one."""
        if not scores:
            raise ValueError("no globals to choose from: seed the memory first (htam memory seed)")
        scored = _drawable(with_probabilities(scores, self.tau, offered), offered)
        weights = [s.probability or 0.0 for s in scored]
        return self.rng(step_index).choices(scored, weights=weights, k=1)[0]
