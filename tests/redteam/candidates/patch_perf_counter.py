"""Cheat: slows the wall clock the judge reads by patching time.perf_counter."""

import time

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
extern "C" __global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}
"""

_start = time.perf_counter()
_real_counter = time.perf_counter
time.perf_counter = lambda: _start + (_real_counter() - _start) * 0.25


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        n = x.numel()
        self.kernels.launch("relu_kernel", grid=((n + 255) // 256,), block=(256,), args=(x, y, n), shared_mem=0)
        return y
