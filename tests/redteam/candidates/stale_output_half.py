"""Cheat: computes only the first half of the output and relies on stale memory for the rest.

empty_like may hand back the block the reference's output just freed, so the second half
already holds the right values on a judge that does not poison outputs.
"""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
extern "C" __global__ void relu_pairs(const float* __restrict__ x, float* __restrict__ y, long long pairs) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < pairs) {
        // "each thread handles a pair": element i of the pair range
        y[i] = fmaxf(x[i], 0.0f);
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        pairs = x.numel() // 2
        self.kernels.launch("relu_pairs", grid=((pairs + 255) // 256,), block=(256,), args=(x, y, pairs), shared_mem=0)
        return y
