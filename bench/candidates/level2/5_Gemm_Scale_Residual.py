"""(x @ W^T + b) * scale + x in one kernel: the tiled SGEMM with a bias, scale and residual epilogue."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8
#define THREADS 256  // (BM / TM) * (BN / TN)

// One 128x128 tile of C = A @ op(B) per block, 8x8 outputs per thread, fp32 FMA (no TF32).
// A is M x K row-major. B is K x N row-major, or with b_nk it is N x K row-major (a
// Linear weight), i.e. C = A @ B^T. Out-of-range loads read zeros; epilogue(m, n, acc)
// writes one output.
template <typename Epilogue>
__device__ __forceinline__ void sgemm_tile(const float* __restrict__ A, const float* __restrict__ B,
                                           int M, int N, int K, bool b_nk, Epilogue epilogue) {
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];
    int tid = threadIdx.x;
    int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    int tx = tid % (BN / TN), ty = tid / (BN / TN);
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        {   // A tile, BM rows x BK columns: two threads per row, four k each
            int r = tid / 2, kk = (tid % 2) * 4, gm = m0 + r;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                int gk = k0 + kk + i;
                As[kk + i][r] = (gm < M && gk < K) ? A[(long long)gm * K + gk] : 0.0f;
            }
        }
        if (b_nk) {  // B stored N x K: two threads per n, four k each
            int c = tid / 2, kk = (tid % 2) * 4, gn = n0 + c;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                int gk = k0 + kk + i;
                Bs[kk + i][c] = (gn < N && gk < K) ? B[(long long)gn * K + gk] : 0.0f;
            }
        } else {  // B stored K x N: 32 threads per k row, four n each
            int kk = tid / 32, c = (tid % 32) * 4, gk = k0 + kk;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                int gn = n0 + c + i;
                Bs[kk][c + i] = (gk < K && gn < N) ? B[(long long)gk * N + gn] : 0.0f;
            }
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[k][ty * TM + i];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k][tx * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        int gm = m0 + ty * TM + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            int gn = n0 + tx * TN + j;
            if (gm < M && gn < N) epilogue(gm, gn, acc[i][j]);
        }
    }
}

struct BiasScaleResidual {
    const float* bias;
    const float* x;  // the residual: x is M x K with K == N
    float* y;
    int N;
    float scale;
    __device__ void operator()(int m, int n, float acc) const {
        long long i = (long long)m * N + n;
        y[i] = (acc + bias[n]) * scale + x[i];
    }
};

extern "C" __global__ void gemm_scale_residual_kernel(const float* __restrict__ x, const float* __restrict__ weight,
                                                      const float* __restrict__ bias, float* __restrict__ y,
                                                      float scale, int M, int N, int K) {
    sgemm_tile(x, weight, M, N, K, true, BiasScaleResidual{bias, x, y, N, scale});
}
"""

TILE = 128
THREADS = 256


class ModelNew(nn.Module):
    def __init__(self, features, scale):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.scale = scale
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, x):
        x = x.contiguous()
        M, K = x.shape
        N = self.linear.out_features
        y = torch.empty((M, N), dtype=x.dtype, device=x.device)
        grid = ((N + TILE - 1) // TILE, (M + TILE - 1) // TILE)
        self.kernels.launch(
            "gemm_scale_residual_kernel",
            grid=grid,
            block=(THREADS,),
            args=(x, self.linear.weight, self.linear.bias, y, float(self.scale), M, N, K),
        )
        return y
