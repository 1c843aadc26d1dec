"""Half-precision LayerNorm without affine: one block per row, fp32 statistics (mean, then squared deviations)."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
#include <cuda_fp16.h>

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

// One block per row; the row is re-read from L1/L2 by the later passes. Pairs of halves when cols is even.
extern "C" __global__ void layer_norm_fp16_kernel(const __half* __restrict__ x,
        __half* __restrict__ y, int cols, float eps) {
    __shared__ float scratch[THREADS / 32];
    const __half* p = x + (long long)blockIdx.x * cols;
    __half* q = y + (long long)blockIdx.x * cols;
    bool pairs = cols % 2 == 0;
    const __half2* p2 = reinterpret_cast<const __half2*>(p);
    int steps = pairs ? cols / 2 : cols;

    float sum = 0.0f;
    for (int i = threadIdx.x; i < steps; i += THREADS) {
        if (pairs) {
            float2 v = __half22float2(p2[i]);
            sum += v.x + v.y;
        } else {
            sum += __half2float(p[i]);
        }
    }
    float mean = block_sum(sum, scratch) / cols;

    float m2 = 0.0f;
    for (int i = threadIdx.x; i < steps; i += THREADS) {
        if (pairs) {
            float2 v = __half22float2(p2[i]);
            m2 += (v.x - mean) * (v.x - mean) + (v.y - mean) * (v.y - mean);
        } else {
            float d = __half2float(p[i]) - mean;
            m2 += d * d;
        }
    }
    float rstd = rsqrtf(block_sum(m2, scratch) / cols + eps);

    for (int i = threadIdx.x; i < steps; i += THREADS) {
        if (pairs) {
            float2 v = __half22float2(p2[i]);
            reinterpret_cast<__half2*>(q)[i] = __floats2half2_rn((v.x - mean) * rstd, (v.y - mean) * rstd);
        } else {
            q[i] = __float2half_rn((__half2float(p[i]) - mean) * rstd);
        }
    }
}
"""

THREADS = 256


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.ln = nn.LayerNorm(dim, elementwise_affine=False)
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.size(-1)
        rows = x.numel() // cols
        self.kernels.launch(
            "layer_norm_fp16_kernel", grid=(rows,), block=(THREADS,), args=(x, y, cols, float(self.ln.eps))
        )
        return y
