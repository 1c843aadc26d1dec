"""L1 normalization of each row of a 2-D tensor, x / mean(|x|) as KernelBench's 38_L1Norm_ has it now (an earlier
version divided by the sum): one block per row, a block reduction then a scaling pass."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
#define THREADS 1024

__device__ float block_sum(float v, float* scratch) {
    for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < THREADS / 32; ++w) total += scratch[w];
    __syncthreads();  // scratch is reused by the next call
    return total;
}

extern "C" __global__ void row_norm_kernel(const float* __restrict__ x, float* __restrict__ y, long long cols) {
    __shared__ float scratch[THREADS / 32];
    const float* p = x + blockIdx.x * cols;
    float* q = y + blockIdx.x * cols;
    float s = 0.0f;
    for (long long i = threadIdx.x; i < cols; i += THREADS) {
        float v = p[i];
        s += fabsf(v);
    }
    s = block_sum(s, scratch);
    float inv = (float)cols / s;
    for (long long i = threadIdx.x; i < cols; i += THREADS) q[i] = p[i] * inv;
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        self.kernels.launch("row_norm_kernel", grid=(rows,), block=(1024,), args=(x, y, cols))
        return y
