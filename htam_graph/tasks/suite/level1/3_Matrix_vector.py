"""y = A @ x for a 16384x16384 fp32 matrix and a column vector: 0.5 GFLOP, 1.07 GB moved."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Matrix-vector product; memory bound (the matrix is read once)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, x)


M = 16384
K = 16384


def get_inputs():
    A = torch.rand(M, K)
    x = torch.rand(K, 1)
    return [A, x]


def get_init_inputs():
    return []
