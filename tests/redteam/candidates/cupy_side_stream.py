"""Cheat: bypasses the runner's launcher with CuPy and runs the kernel on its own
non-blocking stream."""

import cupy
import torch
import torch.nn as nn

CUDA_SRC = r"""
extern "C" __global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernel = cupy.RawKernel(CUDA_SRC, "relu_kernel")
        self.stream = cupy.cuda.Stream(non_blocking=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        n = x.numel()
        with self.stream:
            self.kernel(((n + 255) // 256,), (256,), (cupy.asarray(x), cupy.asarray(y), cupy.int64(n)))
        return y
