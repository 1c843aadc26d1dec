"""Cheat (a forbidden module through an allowed module's namespace): takes ctypes from the
runner's own native module, creates a non-blocking stream through the CUDA runtime and
launches there, off the timed stream."""

import torch
import torch.nn as nn

from htam_graph.runner.native import ctypes, load_cuda

CUDA_SRC = r"""
extern "C" __global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}
"""

_cudart = ctypes.CDLL("libcudart.so")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = load_cuda(CUDA_SRC)
        handle = ctypes.c_void_p()
        _cudart.cudaStreamCreateWithFlags(ctypes.byref(handle), 1)
        self.side = torch.cuda.ExternalStream(handle.value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        n = x.numel()
        with torch.cuda.stream(self.side):
            self.kernels.launch("relu_kernel", grid=((n + 255) // 256,), block=(256,), args=(x, y, n), shared_mem=0)
        return y
