"""Tanh-GELU chain, step 1: one kernel per stage of the formula (cube, inner argument, tanh,
output), the way eager PyTorch runs the chain, each stage a full pass over memory."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
extern "C" __global__ void cube(const float* __restrict__ x, float* __restrict__ t, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; t[i] = v * v * v; }
}

extern "C" __global__ void inner_arg(const float* __restrict__ x, float* __restrict__ t, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) t[i] = 0.7978845608028654f * (x[i] + 0.044715f * t[i]);
}

extern "C" __global__ void tanh_inplace(float* __restrict__ t, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) t[i] = tanhf(t[i]);
}

extern "C" __global__ void output(const float* __restrict__ x, const float* __restrict__ t, float* __restrict__ y,
                                  long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = 0.5f * x[i] * (1.0f + t[i]);
}
"""

THREADS = 256


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, x):
        x = x.contiguous()
        t = torch.empty_like(x)
        y = torch.empty_like(x)
        n = x.numel()
        grid = ((n + THREADS - 1) // THREADS,)
        self.kernels.launch("cube", grid=grid, block=(THREADS,), args=(x, t, n))
        self.kernels.launch("inner_arg", grid=grid, block=(THREADS,), args=(x, t, n))
        self.kernels.launch("tanh_inplace", grid=grid, block=(THREADS,), args=(t, n))
        self.kernels.launch("output", grid=grid, block=(THREADS,), args=(x, t, y, n))
        return y
