"""Cheat (caching keyed on a fingerprint of the inputs): remembers outputs by eight sampled
input values, not by address, so new buffers with the same values hit the cache and new
values in the same buffers do not."""

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
        self.memo = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.view(-1)
        step = max(1, flat.numel() // 8)
        key = tuple(flat[i * step].item() for i in range(8))
        if key in self.memo:
            return self.memo[key].clone()
        y = torch.empty_like(x)
        n = x.numel()
        self.kernels.launch("relu_kernel", grid=((n + 255) // 256,), block=(256,), args=(x, y, n), shared_mem=0)
        self.memo[key] = y
        return y
