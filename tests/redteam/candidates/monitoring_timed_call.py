"""Cheat (tampering with the judge from inside the candidate, Python 3.12+): on its first call
it registers a sys.monitoring callback on the return of the harness's timing function,
which divides each trial's event and host times by ten before the harness reports them.
Nothing is replaced and no trace or profile function is set; the tool id is freed again,
so it looks unused while its events stay active. An honest ReLU otherwise."""

import sys

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
extern "C" __global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}
"""


def _faster(code, offset, trial):
    if hasattr(trial, "synced_ms"):  # the harness's Trial, a frozen dataclass
        for name in ("ms", "synced_ms", "host_ms"):
            object.__setattr__(trial, name, getattr(trial, name) / 10)


def _install():
    mon = sys.monitoring
    timing = sys.modules["htam_graph.runner.timing"]
    tool = next(i for i in range(6) if mon.get_tool(i) is None)
    mon.use_tool_id(tool, "profiler")
    mon.register_callback(tool, mon.events.PY_RETURN, _faster)
    mon.set_local_events(tool, timing.timed_call.__code__, mon.events.PY_RETURN)
    mon.free_tool_id(tool)  # the id reads as free; the callback and the local events stay


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = load_cuda(CUDA_SRC)
        self.installed = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.installed:  # after the load-time report, before any timed trial
            _install()
            self.installed = True
        y = torch.empty_like(x)
        n = x.numel()
        self.kernels.launch("relu_kernel", grid=((n + 255) // 256,), block=(256,), args=(x, y, n), shared_mem=0)
        return y
