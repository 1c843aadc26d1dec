"""Cheat (or a bug that passes by luck): ReLU as a running max max(y, 0, x), y assumed zeroed.

torch.empty_like does not zero; fresh device memory often happens to be zero, so the
result is right until the allocator hands back a dirty block.
"""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
extern "C" __global__ void relu_accumulate(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {
        float lo = fmaxf(y[i], 0.0f);  // y starts at 0, so this is max(0, x)
        y[i] = fmaxf(lo, x[i]);
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        n = x.numel()
        self.kernels.launch("relu_accumulate", grid=((n + 255) // 256,), block=(256,), args=(x, y, n), shared_mem=0)
        return y
