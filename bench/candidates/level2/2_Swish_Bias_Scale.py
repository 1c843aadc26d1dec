"""(x * sigmoid(x) + bias[col]) * scale fused into one pass; 16-byte accesses when rows allow."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
__device__ __forceinline__ float swish_bias_scale(float x, float b, float scale) {
    float s = 1.0f / (1.0f + expf(-x));
    return (x * s + b) * scale;
}

// x is (rows, dim) row-major; bias has dim entries.
extern "C" __global__ void swish_bias_scale_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                                   float* __restrict__ y, long long n, int dim, float scale) {
    long long stride = (long long)gridDim.x * blockDim.x;
    long long first = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (dim % 4 == 0) {
        const float4* x4 = reinterpret_cast<const float4*>(x);
        float4* y4 = reinterpret_cast<float4*>(y);
        for (long long i = first; i < n / 4; i += stride) {
            int col = (int)((i * 4) % dim);  // the 4 elements share a row since dim % 4 == 0
            float4 v = x4[i];
            v.x = swish_bias_scale(v.x, bias[col], scale);
            v.y = swish_bias_scale(v.y, bias[col + 1], scale);
            v.z = swish_bias_scale(v.z, bias[col + 2], scale);
            v.w = swish_bias_scale(v.w, bias[col + 3], scale);
            y4[i] = v;
        }
    } else {
        for (long long i = first; i < n; i += stride) {
            y[i] = swish_bias_scale(x[i], bias[i % dim], scale);
        }
    }
}
"""

THREADS = 256
MAX_BLOCKS = 8192


class ModelNew(nn.Module):
    def __init__(self, dim, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim) * 0.1)
        self.scale = scale
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        dim = x.size(-1)
        blocks = max(1, min(MAX_BLOCKS, (n // 4 + THREADS - 1) // THREADS))
        self.kernels.launch(
            "swish_bias_scale_kernel",
            grid=(blocks,),
            block=(THREADS,),
            args=(x, self.bias, y, n, dim, float(self.scale)),
            shared_mem=0,
        )
        return y
