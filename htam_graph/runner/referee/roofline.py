"""Where a candidate's time sits against the device's limits (docs/judge.md, "Roofline").

Peak bandwidth = 2 (double data rate) x memory clock x bus width; peak compute = SMs x SM
clock x FLOPs per SM per clock for the task's dtype. The per-clock rates are the
architecture's dense rates: CUDA-core FMA rates for fp32 and fp64 (TF32 is not allowed in
an fp32 task, so its tensor-core rate is not the ceiling) and tensor-core rates for
fp16/bf16. An architecture not in the table gets no compute peak (the floor then counts
bytes only).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from htam_graph.runner.models import Roofline

# (major, minor) -> dtype -> FLOPs per SM per clock (an FMA counts 2).
_FLOPS_PER_SM_CLOCK: dict[tuple[int, int], dict[torch.dtype, int]] = {
    (8, 0): {torch.float64: 64, torch.float32: 128, torch.float16: 2048, torch.bfloat16: 2048},  # A100
    (9, 0): {torch.float64: 128, torch.float32: 256, torch.float16: 4096, torch.bfloat16: 4096},  # H100/H200
    (10, 0): {torch.float64: 128, torch.float32: 256, torch.float16: 8192, torch.bfloat16: 8192},  # B200
}


@dataclass(frozen=True)
class DevicePeaks:
    bandwidth_gbs: float
    sm_count: int
    clock_ghz: float
    capability: tuple[int, int]

    @classmethod
    def of(cls, device: torch.device) -> DevicePeaks:
        props = torch.cuda.get_device_properties(device)
        # memory_clock_rate and clock_rate are in kHz, memory_bus_width in bits.
        bandwidth = 2 * props.memory_clock_rate * 1e3 * props.memory_bus_width / 8 / 1e9
        return cls(bandwidth, props.multi_processor_count, props.clock_rate / 1e6, (props.major, props.minor))

    def tflops(self, dtype: torch.dtype) -> float | None:
        rate = _FLOPS_PER_SM_CLOCK.get(self.capability, {}).get(dtype)
        return None if rate is None else self.sm_count * self.clock_ghz * 1e9 * rate / 1e12


def moved_bytes(inputs: Iterable[Any], model: torch.nn.Module, outputs: Iterable[Any]) -> int:
    """What the roofline counts as moved: every input tensor, parameter and buffer read once
    (a tied parameter once), every output written once. The task's text
    (loop/runs.task_context) counts with this same function, so the prompt's numbers agree."""
    state = [*model.parameters(), *model.buffers()]  # each tensor once, tied ones too
    read = sum(t.nbytes for t in (*inputs, *state) if isinstance(t, torch.Tensor))
    return read + sum(t.nbytes for t in outputs if isinstance(t, torch.Tensor))


def roofline(bytes_moved: int, flops: int, dtype: torch.dtype, peaks: DevicePeaks, time_ms: float | None) -> Roofline:
    tflops = peaks.tflops(dtype)
    memory_ms = bytes_moved / (peaks.bandwidth_gbs * 1e9) * 1e3 if peaks.bandwidth_gbs > 0 else 0.0
    compute_ms = flops / (tflops * 1e12) * 1e3 if tflops and flops else 0.0
    seconds = time_ms / 1e3 if time_ms else None
    return Roofline(
        bytes_moved=bytes_moved,
        flops=flops,
        peak_bandwidth_gbs=peaks.bandwidth_gbs,
        peak_tflops=tflops,
        floor_ms=max(memory_ms, compute_ms),
        bandwidth_fraction=bytes_moved / seconds / (peaks.bandwidth_gbs * 1e9) if seconds else None,
        compute_fraction=flops / seconds / (tflops * 1e12) if seconds and tflops else None,
    )
