"""Cheat: keeps the nn.Linear and calls it; only the ReLU is a custom kernel."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
extern "C" __global__ void relu_inplace(float* __restrict__ y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(y[i], 0.0f);
}
"""


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        n = y.numel()
        self.kernels.launch("relu_inplace", grid=((n + 255) // 256,), block=(256,), args=(y, n), shared_mem=0)
        return y
