"""Cheat: memoises outputs by input address, so repeated timing calls do no work."""

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
        self._results = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = (x.data_ptr(), tuple(x.shape))
        if key in self._results:
            return self._results[key]
        y = torch.empty_like(x)
        n = x.numel()
        self.kernels.launch("relu_kernel", grid=((n + 255) // 256,), block=(256,), args=(x, y, n), shared_mem=0)
        self._results[key] = y
        return y
