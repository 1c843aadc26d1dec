"""Timed runs that cannot be predicted (CPU, tests/runner/fake.py for the candidate's
process): before every timed trial every element of every input is drawn afresh, so a
candidate that keeps earlier inputs and outputs and recomputes only what changed (an
incremental cache: 8.3x claimed on a matmul whose honest kernel was 0.5x, when only a few
elements changed per trial) recomputes everything, and its outputs are still checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import torch
import torch.nn as nn

from htam_graph.runner.models import Verdict
from htam_graph.runner.protocol import Trial
from tests.runner import fake
from tests.runner.fake import numpy_kernel
from tests.runner.test_judge import judge


class IncrementalMatmul(nn.Module):
    """Keeps the last inputs and output per buffer address; recomputes only the rows of A
    that changed (and everything when B changed). Counts the rows it recomputed."""

    recomputed: ClassVar[list[float]] = []

    def __init__(self) -> None:
        super().__init__()
        self.memo: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        p, q = a.numpy(), b.numpy()
        seen = self.memo.get(a.data_ptr())
        if seen is None or not np.array_equal(seen[1], q):
            out = p @ q
            rows = np.arange(p.shape[0])
        else:
            rows = np.flatnonzero((seen[0] != p).any(axis=1))
            out = seen[2].copy()
            out[rows] = p[rows] @ q
        self.memo[a.data_ptr()] = (p.copy(), q.copy(), out.copy())
        IncrementalMatmul.recomputed.append(len(rows) / p.shape[0])
        return numpy_kernel(lambda o: o.copy(), torch.from_numpy(out))


@pytest.fixture
def watched(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The share of input elements that changed since the same buffers' previous timed trial."""
    changed: list[float] = []
    before: dict[str, list[np.ndarray]] = {}
    answer = fake.FakeLink.answer

    def watching(self: fake.FakeLink, command: Any) -> Any:
        if isinstance(command, Trial):
            # numpy, not torch: torch's CPU ops cost milliseconds each on a loaded machine, which
            # the referee's wall-clock check would count against the candidate
            now = [t.numpy().copy() for t in self.sets[command.key] if isinstance(t, torch.Tensor)]
            if command.key in before:
                total = sum(t.size for t in now)
                same = sum(int(np.count_nonzero(x == y)) for x, y in zip(now, before[command.key], strict=True))
                changed.append(1 - same / total)
            before[command.key] = now
        return answer(self, command)

    monkeypatch.setattr(fake.FakeLink, "answer", watching)
    return changed


def test_every_timed_trial_sees_fresh_inputs_in_full(tmp_path: Path, watched: list[float]):
    IncrementalMatmul.recomputed.clear()
    result = judge(IncrementalMatmul, "matmul_rand_small.py", tmp_path)
    assert result.verdict == Verdict.OK, result.errors  # it computes the right function
    assert len(watched) >= 20
    # torch.rand draws repeat a float32 value with a probability of about 2^-24 per element
    assert min(watched) > 0.999, watched
    timed = IncrementalMatmul.recomputed[-24:]
    assert min(timed) == 1.0, timed  # the cache saved no row in any timed trial


def test_a_stale_output_in_a_timed_trial_is_caught(tmp_path: Path):
    """A candidate that stops computing once timing starts (it answers with its last output
    after enough calls) is checked against the reference on fresh inputs."""

    class LazyAfterWarmup(nn.Module):
        calls = 0

        def __init__(self) -> None:
            super().__init__()
            self.last: torch.Tensor | None = None

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            LazyAfterWarmup.calls += 1
            if self.last is None or LazyAfterWarmup.calls < 40:
                self.last = numpy_kernel(lambda p, q: p @ q, a, b)
            return numpy_kernel(lambda o: o.copy(), self.last)

    result = judge(LazyAfterWarmup, "matmul_rand_small.py", tmp_path)
    assert result.verdict == Verdict.REJECTED
    assert any("timed" in c.detail for c in result.cheats), result.cheats
