"""Honest control on the low-signal task: a real two-pass row reduction (not a constant)."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
__device__ float block_sum(float v, float* scratch) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffff, v, off);
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = (threadIdx.x < blockDim.x / 32) ? scratch[lane] : 0.0f;
    if (warp == 0)
        for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffff, v, off);
    __syncthreads();
    return v;  // valid in thread 0
}

extern "C" __global__ void centered_row_mean(const float* __restrict__ x, float* __restrict__ out,
                                             long long cols) {
    __shared__ float scratch[32];
    __shared__ float mean;
    const float* row = x + blockIdx.x * cols;
    float s = 0.0f;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) mean = s / (float)cols;
    __syncthreads();
    float d = 0.0f;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) d += row[c] - mean;
    d = block_sum(d, scratch);
    if (threadIdx.x == 0) out[blockIdx.x] = d / (float)cols;
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        self.kernels.launch("centered_row_mean", grid=(rows,), block=(256,), args=(x, out, cols), shared_mem=0)
        return out
