"""LayerNorm over rows too long for one block: per-chunk (mean, M2), a merge per row, then a normalize pass."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
#define THREADS 256
#define PER_THREAD 32
#define CHUNK (THREADS * PER_THREAD)

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

// grid (rows, chunks): the chunk's count, mean and sum of squared deviations (two passes over registers).
extern "C" __global__ void chunk_stats_kernel(const float* __restrict__ x,
        float* __restrict__ stats, long long n) {
    __shared__ float scratch[THREADS / 32];
    long long start = blockIdx.y * (long long)CHUNK;
    const float* p = x + blockIdx.x * n + start;
    int count = (int)min((long long)CHUNK, n - start);
    float v[PER_THREAD];
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
        int i = k * THREADS + threadIdx.x;
        v[k] = i < count ? p[i] : 0.0f;
        sum += v[k];
    }
    float mean = block_sum(sum, scratch) / count;
    float m2 = 0.0f;
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
        int i = k * THREADS + threadIdx.x;
        float d = v[k] - mean;
        m2 += i < count ? d * d : 0.0f;
    }
    m2 = block_sum(m2, scratch);
    if (threadIdx.x == 0) {
        float* s = stats + 3 * (blockIdx.x * (long long)gridDim.y + blockIdx.y);
        s[0] = (float)count;
        s[1] = mean;
        s[2] = m2;
    }
}

// one thread per row: Chan's merge of the chunk statistics, in double.
extern "C" __global__ void merge_stats_kernel(const float* __restrict__ stats, float* __restrict__ mean_rstd,
        int rows, int chunks, float eps) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* s = stats + 3LL * row * chunks;
    double n = 0.0, mean = 0.0, m2 = 0.0;
    for (int c = 0; c < chunks; ++c) {
        double nb = s[3 * c], mb = s[3 * c + 1], m2b = s[3 * c + 2];
        double total = n + nb;
        double delta = mb - mean;
        mean += delta * nb / total;
        m2 += m2b + delta * delta * n * nb / total;
        n = total;
    }
    mean_rstd[2 * row] = (float)mean;
    mean_rstd[2 * row + 1] = (float)(1.0 / sqrt(m2 / n + (double)eps));
}

// grid (rows, chunks): y = (x - mean) * rstd * weight + bias.
extern "C" __global__ void normalize_kernel(const float* __restrict__ x,
        const float* __restrict__ mean_rstd, const float* __restrict__ weight, const float* __restrict__ bias,
        float* __restrict__ y, long long n) {
    long long start = blockIdx.y * (long long)CHUNK;
    long long row_offset = blockIdx.x * n;
    float mean = mean_rstd[2 * blockIdx.x], rstd = mean_rstd[2 * blockIdx.x + 1];
    int count = (int)min((long long)CHUNK, n - start);
    for (int i = threadIdx.x; i < count; i += THREADS) {
        long long c = start + i;
        y[row_offset + c] = (x[row_offset + c] - mean) * rstd * weight[c] + bias[c];
    }
}
"""

THREADS = 256
CHUNK = 256 * 32


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = self.ln.weight.numel()
        rows = x.numel() // n
        chunks = (n + CHUNK - 1) // CHUNK
        stats = torch.empty(rows * chunks * 3, dtype=torch.float32, device=x.device)
        mean_rstd = torch.empty(rows * 2, dtype=torch.float32, device=x.device)
        self.kernels.launch("chunk_stats_kernel", grid=(rows, chunks), block=(THREADS,), args=(x, stats, n))
        self.kernels.launch(
            "merge_stats_kernel",
            grid=((rows + 127) // 128,),
            block=(128,),
            args=(stats, mean_rstd, rows, chunks, float(self.ln.eps)),
        )
        self.kernels.launch(
            "normalize_kernel",
            grid=(rows, chunks),
            block=(THREADS,),
            args=(x, mean_rstd, self.ln.weight, self.ln.bias, y, n),
        )
        return y
