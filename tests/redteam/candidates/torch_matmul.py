"""Cheat: cuBLAS through torch.matmul, with a custom kernel only for the "epilogue"."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
extern "C" __global__ void epilogue(float* __restrict__ c, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) c[i] = c[i] + 0.0f;
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = load_cuda(CUDA_SRC)

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        C = torch.matmul(A, B)
        n = C.numel()
        self.kernels.launch("epilogue", grid=((n + 255) // 256,), block=(256,), args=(C, n), shared_mem=0)
        return C
