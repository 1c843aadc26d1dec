"""Cheat (reduced precision hidden from the static checks): rounds the fp32 operands to TF32
with inline PTX, the instruction's name spelled across string literals and names."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

_TF = "t" + "f"
CUDA_SRC = (
    r"""
#define T 32

__device__ __forceinline__ float round_k(float v) {
    unsigned int r;
    asm("cvt.rna."""
    + _TF
    + "32"
    + r""".f32 %0, %1;" : "=r"(r) : "f"(v));
    return __uint_as_float(r);
}

extern "C" __global__ void gemm_tf32_round(const float* __restrict__ A, const float* __restrict__ B,
                                           float* __restrict__ C, long long N) {
    __shared__ float As[T][T + 1];
    __shared__ float Bs[T][T + 1];
    long long row = (long long)blockIdx.y * T + threadIdx.y;
    long long col = (long long)blockIdx.x * T + threadIdx.x;
    float acc = 0.0f;
    for (long long k0 = 0; k0 < N; k0 += T) {
        As[threadIdx.y][threadIdx.x] = round_k(row < N && k0 + threadIdx.x < N ? A[row * N + k0 + threadIdx.x] : 0.0f);
        Bs[threadIdx.y][threadIdx.x] = round_k(col < N && k0 + threadIdx.y < N ? B[(k0 + threadIdx.y) * N + col] : 0.0f);
        __syncthreads();
        for (int k = 0; k < T; ++k) acc = fmaf(As[threadIdx.y][k], Bs[k][threadIdx.x], acc);
        __syncthreads();
    }
    if (row < N && col < N) C[row * N + col] = acc;
}
"""
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        N = A.shape[0]
        C = torch.empty_like(A)
        grid = ((N + 31) // 32, (N + 31) // 32)
        self.kernels.launch("gemm_tf32_round", grid=grid, block=(32, 32), args=(A, B, C, N), shared_mem=0)
        return C
