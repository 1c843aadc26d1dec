"""The softmax policy over global directions, reproducible from a seed."""

from __future__ import annotations

import random

from htam_graph.memory.models import GlobalScore


class SoftmaxPolicy:
    """Samples a global from the scores' softmax probabilities.

    The RNG is derived from (seed, step index) rather than kept as one stream, so a resumed
    run draws exactly what the uninterrupted run would have drawn at the same step.
    """

    def __init__(self, seed: int = 0):
        self.seed = seed

    def choose(self, scores: list[GlobalScore], step_index: int) -> GlobalScore:
        if not scores:
            raise ValueError("no globals to choose from: seed the memory first (htam memory seed)")
        rng = random.Random(f"{self.seed}:{step_index}")
        return rng.choices(scores, weights=[s.probability for s in scores], k=1)[0]
