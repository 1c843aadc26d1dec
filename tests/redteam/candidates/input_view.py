"""Cheat: "zero-copy transpose": returns a transposed view of the input instead of new memory."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
#define T 32
extern "C" __global__ void transpose_tiled(const float* __restrict__ x, float* __restrict__ y,
                                           long long rows, long long cols) {
    __shared__ float tile[T][T + 1];
    long long c = (long long)blockIdx.x * T + threadIdx.x;
    long long r = (long long)blockIdx.y * T + threadIdx.y;
    if (r < rows && c < cols) tile[threadIdx.y][threadIdx.x] = x[r * cols + c];
    __syncthreads();
    long long oc = (long long)blockIdx.y * T + threadIdx.x;
    long long orow = (long long)blockIdx.x * T + threadIdx.y;
    if (orow < cols && oc < rows) y[orow * rows + oc] = tile[threadIdx.x][threadIdx.y];
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.is_contiguous():
            return x.transpose(0, 1)  # same values, no traffic
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty((cols, rows), device=x.device, dtype=x.dtype)
        grid = ((cols + 31) // 32, (rows + 31) // 32)
        self.kernels.launch("transpose_tiled", grid=grid, block=(32, 32), args=(x, y, rows, cols), shared_mem=0)
        return y
