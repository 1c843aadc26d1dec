"""softmax(q @ k^T * scale) in one kernel: a block owns 32 query rows, streams key tiles through shared memory,
writes the scaled scores while keeping an online (max, sum of exp) per row, then normalizes its rows in place."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
#define ROWS 32          // query rows per block
#define KT 64            // keys per shared-memory tile (one key per thread column)
#define THREADS 256      // KT key columns x 4 row groups
#define RPT (ROWS * KT / THREADS)  // rows per thread = 8

struct MaxSum { float m; float s; };  // running max and sum of exp(x - m)

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
    float m = fmaxf(a.m, b.m);
    if (m == -INFINITY) return a;
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

// q (B, S, D), k (B, T, D), out (B, S, T); D % 4 == 0. grid = (ceil(S / ROWS), B).
// Dynamic shared memory: (ROWS + KT) * (D + 4) floats.
extern "C" __global__ void bmm_scale_softmax_kernel(const float* __restrict__ q, const float* __restrict__ k,
        float* __restrict__ out, int S, int T, int D, float scale) {
    extern __shared__ float4 smem4[];
    __shared__ MaxSum warp_part[ROWS][KT / 32];
    __shared__ float row_max[ROWS], row_inv[ROWS];
    int ld = D + 4;  // padding keeps float4 rows aligned and spreads key rows over the banks
    float* q_s = reinterpret_cast<float*>(smem4);
    float* k_s = q_s + ROWS * ld;
    int tid = threadIdx.x, j = tid % KT, g = tid / KT, lane = tid % 32;
    long long b = blockIdx.y;
    int r0 = blockIdx.x * ROWS;
    int rows_here = min(ROWS, S - r0);
    const float* qb = q + (b * S + r0) * D;
    const float* kb = k + b * T * D;
    float* ob = out + (b * S + r0) * T;

    for (int i = tid; i < ROWS * D; i += THREADS) {
        int r = i / D, d = i % D;
        q_s[r * ld + d] = r < rows_here ? qb[(long long)r * D + d] : 0.0f;
    }
    MaxSum stats[RPT];
#pragma unroll
    for (int r = 0; r < RPT; ++r) stats[r] = {-INFINITY, 0.0f};

    for (int t0 = 0; t0 < T; t0 += KT) {
        __syncthreads();  // the previous key tile is consumed (and q_s is complete)
        for (int i = tid; i < KT * D; i += THREADS) {
            int kr = i / D, d = i % D;
            k_s[kr * ld + d] = t0 + kr < T ? kb[(long long)(t0 + kr) * D + d] : 0.0f;
        }
        __syncthreads();
        float acc[RPT];
#pragma unroll
        for (int r = 0; r < RPT; ++r) acc[r] = 0.0f;
        for (int d = 0; d < D; d += 4) {
            float4 kv = *reinterpret_cast<const float4*>(k_s + j * ld + d);
#pragma unroll
            for (int r = 0; r < RPT; ++r) {
                float4 qv = *reinterpret_cast<const float4*>(q_s + (g * RPT + r) * ld + d);
                acc[r] = fmaf(qv.x, kv.x, acc[r]);
                acc[r] = fmaf(qv.y, kv.y, acc[r]);
                acc[r] = fmaf(qv.z, kv.z, acc[r]);
                acc[r] = fmaf(qv.w, kv.w, acc[r]);
            }
        }
        int key = t0 + j;
        if (key < T) {
#pragma unroll
            for (int r = 0; r < RPT; ++r) {
                int row = g * RPT + r;
                if (row < rows_here) {
                    float v = acc[r] * scale;
                    ob[(long long)row * T + key] = v;
                    stats[r] = merge(stats[r], MaxSum{v, 1.0f});
                }
            }
        }
    }

    // Row statistics: merge over the 32 lanes of each warp, then over the KT / 32 warps of a row group.
#pragma unroll
    for (int r = 0; r < RPT; ++r) {
        MaxSum t = stats[r];
        for (int off = 16; off > 0; off /= 2) {
            MaxSum o = {__shfl_xor_sync(0xffffffffu, t.m, off), __shfl_xor_sync(0xffffffffu, t.s, off)};
            t = merge(t, o);
        }
        if (lane == 0) warp_part[g * RPT + r][j / 32] = t;
    }
    __syncthreads();
    if (tid < ROWS) {
        MaxSum t = warp_part[tid][0];
        for (int w = 1; w < KT / 32; ++w) t = merge(t, warp_part[tid][w]);
        row_max[tid] = t.m;
        row_inv[tid] = 1.0f / t.s;
    }
    __syncthreads();  // also makes this block's score writes visible to all its threads

    for (int row = 0; row < rows_here; ++row) {
        float* o = ob + (long long)row * T;
        for (int c = tid; c < T; c += THREADS) o[c] = expf(o[c] - row_max[row]) * row_inv[row];
    }
}
"""

ROWS = 32
KT = 64
THREADS = 256


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, q, k):
        q = q.contiguous()
        k = k.contiguous()
        B, S, D = q.shape
        T = k.size(1)
        if D % 4 != 0:
            raise ValueError("this kernel needs head_dim % 4 == 0")
        out = torch.empty((B, S, T), dtype=q.dtype, device=q.device)
        shared = 4 * (ROWS + KT) * (D + 4)
        self.kernels.launch(
            "bmm_scale_softmax_kernel",
            grid=((S + ROWS - 1) // ROWS, B),
            block=(THREADS,),
            args=(q, k, out, S, T, D, float(self.scale)),
            shared_mem=shared,
        )
        return out
