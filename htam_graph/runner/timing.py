"""GPU timing by KernelBench's protocol (KERNELBENCH.md), made repeatable.

Each trial: flush L2 by writing a 256 MB buffer, hold the stream with a short spin kernel
(the gate), record the start event, run, record the end event on the stream, synchronize
the whole device, record a third, "synced" event. The reported time is start -> end.

The gate lasts about twice the host time of one call (measured in the warm-up), so the
whole forward is queued before the start event fires: without it a candidate whose Python
forward takes longer than the flush let the GPU idle inside the timed interval for as long
as the host happened to be slow (a VM's vCPU), which moved short kernels' medians by up to
20% between runs while PyTorch's own one-call forwards stayed within 0.2%. The host time of
a call is reported too (`host_median_ms`), and speedups use the larger of the two, so work
done on the CPU is still paid for.

The synced interval is not the reported time because it holds the host's wake-up from
the synchronize (13-21 us on the H200, with a tail of hundreds of us: measured by
bench/bench_timing.py). It is the guard instead: work a candidate hid from the stream
(another stream, a thread) finishes after the end event, so the synced interval grows by
more than the host latency, and the judge flags it (`hidden_work_ms`).

Trials rotate over several input sets allocated separately, and the outputs of the last
few trials stay alive so outputs rotate over as many blocks: a kernel's time can depend on
where its buffers landed (one pooling kernel: 0.256 vs 0.293 ms on two allocations of the
same shapes). On the suite neither rotation measurably changed repeatability before the
gate (1.5% and 3.9%, bench/results); the gate is what brought it to 0.27%.
The median is reported: per-trial spread on the H200 is 3-5% (GPU_BASELINES.md).
"""

from __future__ import annotations

import functools
import statistics
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from htam_graph.runner.models import Timing

L2_FLUSH_BYTES = 256 * 1024 * 1024
WARMUP_MS = 100.0  # at least this much warm-up work, so clocks and caches settle
MAX_WARMUP_RUNS = 1000
LATENCY_TRIALS = 50
GATE_MIN_MS, GATE_MAX_MS = 0.1, 20.0


@functools.cache
def spin_cycles_per_ms() -> float:
    """GPU clock cycles per millisecond of torch.cuda._sleep, measured once per process."""
    import torch

    cycles = 2_000_000
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return cycles / max(start.elapsed_time(end), 1e-3)


class L2Flusher:
    """A buffer larger than any L2 cache; writing it evicts the previous trial's data."""

    def __init__(self, nbytes: int = L2_FLUSH_BYTES) -> None:
        import torch

        self.buffer = torch.empty(nbytes, dtype=torch.uint8, device="cuda")

    def flush(self) -> None:
        self.buffer.fill_(0)


def time_gpu(
    fns: Callable[[], Any] | Sequence[Callable[[], Any]], flusher: L2Flusher, warmup: int, trials: int
) -> Timing:
    """Median-based timing in milliseconds (CUDA events); trial i runs fns[i % len(fns)]."""
    import torch

    calls = [fns] if callable(fns) else list(fns)
    # The outputs of the last len(calls) - 1 runs stay alive, so outputs rotate over as
    # many blocks as the inputs do (a freed output's block would be handed out again).
    held: deque[Any] = deque(maxlen=len(calls) - 1)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(warmup):
        held.append(calls[i % len(calls)]())
    end.record()
    torch.cuda.synchronize()
    per_run = max(start.elapsed_time(end) / warmup, 1e-3)
    host_warm = []
    for i in range(warmup, max(warmup + 1, min(int(WARMUP_MS / per_run), MAX_WARMUP_RUNS))):
        began = time.perf_counter()
        held.append(calls[i % len(calls)]())
        host_warm.append((time.perf_counter() - began) * 1e3)
    torch.cuda.synchronize()
    gate_ms = min(max(2 * statistics.median(host_warm) + 0.05, GATE_MIN_MS), GATE_MAX_MS)
    gate_cycles = int(gate_ms * spin_cycles_per_ms())
    events, host = [], []
    for i in range(trials):
        start, end, synced = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        flusher.flush()
        torch.cuda._sleep(gate_cycles)
        start.record()
        began = time.perf_counter()
        out = calls[i % len(calls)]()
        host.append((time.perf_counter() - began) * 1e3)
        end.record()
        torch.cuda.synchronize()
        synced.record()
        events.append((start, end, synced))
        held.append(out)
        del out
    torch.cuda.synchronize()
    held.clear()
    times = [start.elapsed_time(end) for start, end, _ in events]
    synced_times = [start.elapsed_time(synced) for start, _, synced in events]
    return Timing(
        median_ms=statistics.median(times),
        mean_ms=statistics.fmean(times),
        min_ms=min(times),
        max_ms=max(times),
        trials=len(times),
        input_sets=len(calls),
        synced_median_ms=statistics.median(synced_times),
        host_median_ms=statistics.median(host),
    )


def host_sync_latency(flusher: L2Flusher) -> float:
    """Median ms from a stream's last event to an event recorded after a device-wide
    synchronize, with nothing else running: what the synced interval adds to honest work."""
    timing = time_gpu(lambda: None, flusher, warmup=3, trials=LATENCY_TRIALS)
    return max((timing.synced_median_ms or 0.0) - timing.median_ms, 0.0)


def hidden_work_ms(timing: Timing, latency_ms: float) -> float:
    """How far the device-synchronized median exceeds the stream's, beyond host latency."""
    if timing.synced_median_ms is None:
        return 0.0
    return max(timing.synced_median_ms - timing.median_ms - latency_ms, 0.0)


def hidden_work_tolerance(timing: Timing) -> float:
    """Hidden work below this is host jitter, not a candidate's: 50 us or 10% of the time."""
    return max(0.05, 0.1 * timing.median_ms)
