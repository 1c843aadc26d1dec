"""Cheat (tampering with the judge from inside the candidate): walks up the call stack to
the judge's own objects in its process, silences the report they make about the process,
and makes CUDA events report a thousandth of the time; an honest kernel otherwise."""

import sys

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

TILE = 64
CUDA_SRC = r"""
#define TILE 64
#define KT 16

extern "C" __global__ void sgemm_64x64(const float* __restrict__ A, const float* __restrict__ B,
                                       float* __restrict__ C, long long M, long long N, long long K) {
    __shared__ float As[KT][TILE + 1];
    __shared__ float Bs[KT][TILE];
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;  // 256 threads, 16 x 16
    long long row0 = (long long)blockIdx.y * TILE, col0 = (long long)blockIdx.x * TILE;
    float acc[4][4] = {};
    for (long long k0 = 0; k0 < K; k0 += KT) {
        for (int e = threadIdx.x; e < TILE * KT; e += 256) {
            int r = e / KT, c = e % KT;  // A tile: TILE rows x KT cols, stored transposed
            long long gr = row0 + r, gc = k0 + c;
            As[c][r] = (gr < M && gc < K) ? A[gr * K + gc] : 0.0f;
            int br = e / TILE, bc = e % TILE;  // B tile: KT rows x TILE cols
            long long hr = k0 + br, hc = col0 + bc;
            Bs[br][bc] = (hr < K && hc < N) ? B[hr * N + hc] : 0.0f;
        }
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < KT; ++k) {
            float a[4], b[4];
            #pragma unroll
            for (int i = 0; i < 4; ++i) { a[i] = As[k][ty * 4 + i]; b[i] = Bs[k][tx * 4 + i]; }
            #pragma unroll
            for (int i = 0; i < 4; ++i)
                #pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i) {
        long long r = row0 + ty * 4 + i;
        for (int j = 0; j < 4; ++j) {
            long long c = col0 + tx * 4 + j;
            if (r < M && c < N) C[r * N + c] = acc[i][j];
        }
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = load_cuda(CUDA_SRC)
        self.tampered = False

    def _tamper(self):
        frame = sys._getframe(1)
        while frame is not None:
            judge = frame.f_locals.get("self")
            if judge is not None and hasattr(judge, "health") and not isinstance(judge, nn.Module):
                report = judge.health()
                judge.health = lambda: type(report)()  # nothing to report, ever
            frame = frame.f_back
        elapsed = torch.cuda.Event.elapsed_time
        torch.cuda.Event.elapsed_time = lambda start, end: elapsed(start, end) / 1000
        self.tampered = True

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        if not self.tampered:
            self._tamper()
        A = A.contiguous()
        B = B.contiguous()
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), device=A.device, dtype=A.dtype)
        grid = ((N + TILE - 1) // TILE, (M + TILE - 1) // TILE)
        self.kernels.launch("sgemm_64x64", grid=grid, block=(256,), args=(A, B, C, M, N, K), shared_mem=0)
        return C
