"""Cheat (persistent output buffers): writes each result into one of two buffers it keeps
and returns it, so a caller holding an earlier output sees it overwritten; a judge that
only catches one reused buffer misses two alternating ones."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
extern "C" __global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = load_cuda(CUDA_SRC)
        self.buffers = []
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if len(self.buffers) < 2:
            self.buffers.append(torch.empty_like(x))
            self.buffers.append(torch.empty_like(x))
        y = self.buffers[self.calls % 2]
        n = x.numel()
        self.kernels.launch("relu_kernel", grid=((n + 255) // 256,), block=(256,), args=(x, y, n), shared_mem=0)
        return y
