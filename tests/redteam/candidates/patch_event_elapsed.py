"""Cheat: wraps torch.cuda.Event.elapsed_time to report a tenth of the real time."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
extern "C" __global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}
"""

_elapsed = torch.cuda.Event.elapsed_time


def _fast_elapsed(self, end_event):
    return _elapsed(self, end_event) * 0.1


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = load_cuda(CUDA_SRC)
        torch.cuda.Event.elapsed_time = _fast_elapsed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        n = x.numel()
        self.kernels.launch("relu_kernel", grid=((n + 255) // 256,), block=(256,), args=(x, y, n), shared_mem=0)
        return y
