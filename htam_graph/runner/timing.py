"""GPU timing by KernelBench's protocol (KERNELBENCH.md), with the whole device synchronized.

Each trial: flush L2 by writing a 256 MB buffer, record the start event, run, synchronize
the whole device, record the end event. Synchronizing the device (not only the stream)
before the end event charges work a candidate hid on another stream to the candidate.
The median is reported: per-trial spread on the H200 is 3-5% (GPU_BASELINES.md).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from htam_graph.runner.models import Timing

L2_FLUSH_BYTES = 256 * 1024 * 1024


class L2Flusher:
    """A buffer larger than any L2 cache; writing it evicts the previous trial's data."""

    def __init__(self, nbytes: int = L2_FLUSH_BYTES) -> None:
        import torch

        self.buffer = torch.empty(nbytes, dtype=torch.uint8, device="cuda")

    def flush(self) -> None:
        self.buffer.fill_(0)


WARMUP_MS = 100.0  # at least this much warm-up work, so clocks and caches settle
MAX_WARMUP_RUNS = 1000


def time_gpu(fn: Callable[[], Any], flusher: L2Flusher, warmup: int, trials: int) -> Timing:
    """Median-based timing of `fn` in milliseconds (CUDA events)."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(warmup):
        fn()
    end.record()
    torch.cuda.synchronize()
    per_run = max(start.elapsed_time(end) / warmup, 1e-3)
    for _ in range(min(int(WARMUP_MS / per_run), MAX_WARMUP_RUNS) - warmup):
        fn()
    torch.cuda.synchronize()
    pairs = []
    for _ in range(trials):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flusher.flush()
        start.record()
        fn()
        torch.cuda.synchronize()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    times = [start.elapsed_time(end) for start, end in pairs]
    return Timing(
        median_ms=statistics.median(times), mean_ms=statistics.fmean(times),
        min_ms=min(times), max_ms=max(times), trials=len(times),
    )
