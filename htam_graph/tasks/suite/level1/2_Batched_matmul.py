"""C[b] = A[b] @ B[b] for 128 fp32 matrices of 512x512: 34 GFLOP, 403 MB moved."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Batched matrix multiplication (torch.bmm)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


batch_size = 128
m = 512
k = 512
n = 512


def get_inputs():
    A = torch.rand(batch_size, m, k)
    B = torch.rand(batch_size, k, n)
    return [A, B]


def get_init_inputs():
    return []
