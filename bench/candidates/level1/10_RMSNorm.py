"""RMSNorm fused into one kernel: one block per row, sum of squares then a scaling pass (row re-read from L1/L2)."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
#define THREADS 256

__device__ float block_sum(float v, float* scratch) {
    for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < THREADS / 32; ++w) total += scratch[w];
    __syncthreads();
    return total;
}

// y = x * rsqrt(mean(x^2) + eps) * weight, one block per row.
extern "C" __global__ void rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ weight,
        float* __restrict__ y, int cols, float eps) {
    __shared__ float scratch[THREADS / 32];
    const float* p = x + (long long)blockIdx.x * cols;
    float* q = y + (long long)blockIdx.x * cols;
    bool vec = cols % 4 == 0;
    float squares = 0.0f;
    if (vec) {
        for (int i = threadIdx.x; i < cols / 4; i += THREADS) {
            float4 v = reinterpret_cast<const float4*>(p)[i];
            squares += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
    } else {
        for (int i = threadIdx.x; i < cols; i += THREADS) squares += p[i] * p[i];
    }
    float r = rsqrtf(block_sum(squares, scratch) / cols + eps);
    if (vec) {
        for (int i = threadIdx.x; i < cols / 4; i += THREADS) {
            float4 v = reinterpret_cast<const float4*>(p)[i];
            float4 w = reinterpret_cast<const float4*>(weight)[i];
            float4 o = {v.x * r * w.x, v.y * r * w.y, v.z * r * w.z, v.w * r * w.w};
            reinterpret_cast<float4*>(q)[i] = o;
        }
    } else {
        for (int i = threadIdx.x; i < cols; i += THREADS) q[i] = p[i] * r * weight[i];
    }
}
"""

THREADS = 256


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.size(-1)
        rows = x.numel() // cols
        self.kernels.launch(
            "rms_norm_kernel", grid=(rows,), block=(THREADS,), args=(x, self.weight, y, cols, float(self.eps))
        )
        return y
