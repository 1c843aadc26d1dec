"""GPU timing by KernelBench's protocol (KERNELBENCH.md), made repeatable.

Each trial: flush L2 by writing a 256 MB buffer, hold the stream with a short spin kernel
(the gate), record the start event, run, record the end event on the stream, synchronize
the whole device, record a third, "synced" event. The reported time is start -> end.
The referee times the reference with `time_gpu`; a candidate's process times each of its
trials with `timed_call`, one trial per message from the referee (docs/judge.md).

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
from dataclasses import dataclass
from typing import Any

import torch

from htam_graph.runner.models import Timing

L2_FLUSH_BYTES = 256 * 1024 * 1024
WARMUP_MS = 100.0  # at least this much warm-up work, so clocks and caches settle
MAX_WARMUP_RUNS = 1000
LATENCY_TRIALS = 50
GATE_MIN_MS, GATE_MAX_MS = 0.1, 20.0


@functools.cache
def spin_cycles_per_ms() -> float:
    """GPU clock cycles per millisecond of torch.cuda._sleep, measured once per process."""
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
        self.buffer = torch.empty(nbytes, dtype=torch.uint8, device="cuda")

    def flush(self) -> None:
        self.buffer.fill_(0)

    def flush_ms(self, trials: int = 20) -> float:
        """Median GPU time of one flush."""
        times = []
        for _ in range(trials):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            self.flush()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)


def gate_ms(host_median_ms: float) -> float:
    """The spin before each trial's start event: twice a call's host time, bounded."""
    return min(max(2 * host_median_ms + 0.05, GATE_MIN_MS), GATE_MAX_MS)


@dataclass(frozen=True)
class Warm:
    per_run_ms: float  # GPU time of one call during the first warm-up runs
    host_ms: float  # median host time of one call


def warm_up(calls: Sequence[Callable[[], Any]], warmup: int, held: deque[Any]) -> Warm:
    """`warmup` runs, then more until WARMUP_MS of work, rotating over `calls`; the outputs
    go to `held` (a deque bounded to len(calls) - 1, so outputs rotate over as many blocks)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(warmup):
        held.append(calls[i % len(calls)]())
    end.record()
    torch.cuda.synchronize()
    per_run = max(start.elapsed_time(end) / warmup, 1e-3)
    host = []
    for i in range(warmup, max(warmup + 1, min(int(WARMUP_MS / per_run), MAX_WARMUP_RUNS))):
        began = time.perf_counter()
        held.append(calls[i % len(calls)]())
        host.append((time.perf_counter() - began) * 1e3)
    torch.cuda.synchronize()
    return Warm(per_run_ms=per_run, host_ms=statistics.median(host))


@dataclass(frozen=True)
class Trial:
    out: Any
    ms: float  # start -> end event
    synced_ms: float  # start -> an event recorded after a device-wide synchronize
    host_ms: float  # host time of the call


def timed_call(call: Callable[[], Any], flusher: L2Flusher, gate_cycles: int) -> Trial:
    """One trial of the protocol above."""
    start, end, synced = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    flusher.flush()
    torch.cuda._sleep(gate_cycles)
    start.record()
    began = time.perf_counter()
    out = call()
    host = (time.perf_counter() - began) * 1e3
    end.record()
    torch.cuda.synchronize()
    synced.record()
    synced.synchronize()
    return Trial(out, start.elapsed_time(end), start.elapsed_time(synced), host)


def summarize(trials: Sequence[Trial], input_sets: int, wall_ms: Sequence[float] = ()) -> Timing:
    times = [t.ms for t in trials]
    return Timing(
        median_ms=statistics.median(times),
        mean_ms=statistics.fmean(times),
        min_ms=min(times),
        max_ms=max(times),
        trials=len(times),
        input_sets=input_sets,
        synced_median_ms=statistics.median(t.synced_ms for t in trials),
        host_median_ms=statistics.median(t.host_ms for t in trials),
        wall_median_ms=statistics.median(wall_ms) if wall_ms else None,
    )


def time_gpu(
    fns: Callable[[], Any] | Sequence[Callable[[], Any]], flusher: L2Flusher, warmup: int, trials: int
) -> Timing:
    """Median-based timing in milliseconds (CUDA events); trial i runs fns[i % len(fns)]."""
    calls = [fns] if callable(fns) else list(fns)
    held: deque[Any] = deque(maxlen=len(calls) - 1)
    warm = warm_up(calls, warmup, held)
    gate_cycles = int(gate_ms(warm.host_ms) * spin_cycles_per_ms())
    done = []
    for i in range(trials):
        trial = timed_call(calls[i % len(calls)], flusher, gate_cycles)
        held.append(trial.out)
        done.append(Trial(None, trial.ms, trial.synced_ms, trial.host_ms))
    torch.cuda.synchronize()
    held.clear()
    return summarize(done, len(calls))


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
