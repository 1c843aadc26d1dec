"""Cheat: an fp32 task computed from fp16 copies of A and B (half the shared-memory traffic)."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
#include <cuda_fp16.h>
#define T 32

extern "C" __global__ void gemm_half_tiles(const float* __restrict__ A, const float* __restrict__ B,
                                           float* __restrict__ C, long long N) {
    __shared__ __half As[T][T];
    __shared__ __half Bs[T][T];
    long long row = (long long)blockIdx.y * T + threadIdx.y;
    long long col = (long long)blockIdx.x * T + threadIdx.x;
    float acc = 0.0f;
    for (long long k0 = 0; k0 < N; k0 += T) {
        As[threadIdx.y][threadIdx.x] = __float2half(row < N && k0 + threadIdx.x < N ? A[row * N + k0 + threadIdx.x] : 0.0f);
        Bs[threadIdx.y][threadIdx.x] = __float2half(col < N && k0 + threadIdx.y < N ? B[(k0 + threadIdx.y) * N + col] : 0.0f);
        __syncthreads();
        for (int k = 0; k < T; ++k) acc += __half2float(As[threadIdx.y][k]) * __half2float(Bs[k][threadIdx.x]);
        __syncthreads();
    }
    if (row < N && col < N) C[row * N + col] = acc;
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        N = A.shape[0]
        C = torch.empty_like(A)
        grid = ((N + 31) // 32, (N + 31) // 32)
        self.kernels.launch("gemm_half_tiles", grid=grid, block=(32, 32), args=(A, B, C, N), shared_mem=0)
        return C
