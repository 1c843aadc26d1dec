"""ReLU: one grid-stride pass with 16-byte loads and stores."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
extern "C" __global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long stride = (long long)gridDim.x * blockDim.x;
    long long first = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long n4 = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    for (long long i = first; i < n4; i += stride) {
        float4 v = x4[i];
        v.x = fmaxf(v.x, 0.0f);
        v.y = fmaxf(v.y, 0.0f);
        v.z = fmaxf(v.z, 0.0f);
        v.w = fmaxf(v.w, 0.0f);
        y4[i] = v;
    }
    for (long long i = n4 * 4 + first; i < n; i += stride) {
        y[i] = fmaxf(x[i], 0.0f);
    }
}
"""

THREADS = 256
MAX_BLOCKS = 8192  # enough to fill the GPU; the grid-stride loop covers the rest


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        blocks = max(1, min(MAX_BLOCKS, (n // 4 + THREADS - 1) // THREADS))
        self.kernels.launch("relu_kernel", grid=(blocks,), block=(THREADS,), args=(x, y, n), shared_mem=0)
        return y
