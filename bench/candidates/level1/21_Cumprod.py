"""Row-wise inclusive prefix product: one block per row, register scans joined by warp shuffles and a carry per tile."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
#define THREADS 256
#define ITEMS 8  // consecutive elements per thread per tile
#define TILE (THREADS * ITEMS)

__device__ __forceinline__ float op(float a, float b) { return a * b; }
#define IDENTITY 1.0f

// Inclusive prefix product along each row of a (rows, cols) tensor; one block per row. Each tile of
// TILE elements: a serial scan in registers, a warp scan of the thread totals with shuffles,
// the warp totals through shared memory, and a carry from the previous tiles.
extern "C" __global__ void cumprod_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float warp_total[THREADS / 32];
    const float* p = x + (long long)blockIdx.x * cols;
    float* q = y + (long long)blockIdx.x * cols;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    bool vec = cols % 4 == 0;
    float carry = IDENTITY;
    for (int tile = 0; tile < cols; tile += TILE) {
        int base = tile + threadIdx.x * ITEMS;
        float v[ITEMS];
        if (vec) {
#pragma unroll
            for (int c = 0; c < ITEMS; c += 4) {
                float4 f = base + c < cols ? *reinterpret_cast<const float4*>(p + base + c)
                                           : make_float4(IDENTITY, IDENTITY, IDENTITY, IDENTITY);
                v[c] = f.x;
                v[c + 1] = f.y;
                v[c + 2] = f.z;
                v[c + 3] = f.w;
            }
        } else {
#pragma unroll
            for (int i = 0; i < ITEMS; ++i) v[i] = base + i < cols ? p[base + i] : IDENTITY;
        }
#pragma unroll
        for (int i = 1; i < ITEMS; ++i) v[i] = op(v[i - 1], v[i]);

        float inclusive = v[ITEMS - 1];  // warp-inclusive scan of the thread totals
        for (int off = 1; off < 32; off *= 2) {
            float other = __shfl_up_sync(0xffffffffu, inclusive, off);
            if (lane >= off) inclusive = op(other, inclusive);
        }
        float exclusive = __shfl_up_sync(0xffffffffu, inclusive, 1);
        if (lane == 0) exclusive = IDENTITY;
        if (lane == 31) warp_total[warp] = inclusive;
        __syncthreads();
        float prefix = carry;
        for (int w = 0; w < warp; ++w) prefix = op(prefix, warp_total[w]);
        prefix = op(prefix, exclusive);
        float tile_total = carry;
        for (int w = 0; w < THREADS / 32; ++w) tile_total = op(tile_total, warp_total[w]);
        __syncthreads();  // warp_total is rewritten by the next tile
        carry = tile_total;

#pragma unroll
        for (int i = 0; i < ITEMS; ++i)
            if (base + i < cols) q[base + i] = op(prefix, v[i]);
    }
}
"""

THREADS = 256


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, x):
        if self.dim % x.dim() != x.dim() - 1:
            raise ValueError("this kernel scans along the last dimension only")
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.size(-1)
        rows = x.numel() // cols
        self.kernels.launch("cumprod_kernel", grid=(rows,), block=(THREADS,), args=(x, y, cols))
        return y
