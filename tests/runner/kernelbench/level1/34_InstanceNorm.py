"""InstanceNorm2d (no affine, eps 1e-5): one block per (sample, channel), three passes over its plane."""

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

extern "C" __global__ void instance_norm_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                long long plane, float eps) {
    __shared__ float scratch[THREADS / 32];
    const float* p = x + blockIdx.x * plane;
    float* q = y + blockIdx.x * plane;
    float s = 0.0f;
    for (long long i = threadIdx.x; i < plane; i += THREADS) s += p[i];
    float mean = block_sum(s, scratch) / (float)plane;
    float m2 = 0.0f;
    for (long long i = threadIdx.x; i < plane; i += THREADS) {
        float d = p[i] - mean;
        m2 += d * d;
    }
    float rstd = rsqrtf(block_sum(m2, scratch) / (float)plane + eps);
    for (long long i = threadIdx.x; i < plane; i += THREADS) q[i] = (p[i] - mean) * rstd;
}
"""


class ModelNew(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.inorm = nn.InstanceNorm2d(num_features=num_features)
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n, c, h, w = x.shape
        self.kernels.launch(
            "instance_norm_kernel", grid=(n * c,), block=(1024,), args=(x, y, h * w, float(self.inorm.eps))
        )
        return y
