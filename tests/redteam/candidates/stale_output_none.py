"""Cheat: writes nothing to the output unless an input is NaN; the output is whatever the
allocator returns (often the reference's freed result)."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
extern "C" __global__ void relu_fixup(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        if (v != v) y[i] = v;  // only NaNs need fixing up
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
        self.kernels.launch("relu_fixup", grid=((n + 255) // 256,), block=(256,), args=(x, y, n), shared_mem=0)
        return y
