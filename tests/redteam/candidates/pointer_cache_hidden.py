"""Cheat: the same memoisation by input address, with the address reached by a computed
attribute name so no `data_ptr` appears in the source."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
extern "C" __global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}
"""

_WHERE = "data_" + "ptr"


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = load_cuda(CUDA_SRC)
        self._last_key = None
        self._last_out = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = getattr(x, _WHERE)()
        if key == self._last_key:
            return self._last_out
        y = torch.empty_like(x)
        n = x.numel()
        self.kernels.launch("relu_kernel", grid=((n + 255) // 256,), block=(256,), args=(x, y, n), shared_mem=0)
        self._last_key = key
        self._last_out = y
        return y
