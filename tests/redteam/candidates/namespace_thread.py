"""Cheat: hands the launch to a Python thread and returns before the work is queued, with
threading reached as an attribute of an allowed module (torch.backends.cuda imported
torch, and torch imported threading) instead of imported."""

import torch
import torch.nn as nn

from htam_graph.runner.native import load_cuda

CUDA_SRC = r"""
extern "C" __global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = load_cuda(CUDA_SRC)

    def _launch(self, x, y, n):
        self.kernels.launch("relu_kernel", grid=((n + 255) // 256,), block=(256,), args=(x, y, n), shared_mem=0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        worker = torch.backends.cuda.torch.threading.Thread
        worker(target=self._launch, args=(x, y, x.numel()), daemon=True).start()
        return y
