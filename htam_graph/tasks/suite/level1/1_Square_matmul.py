"""C = A @ B for square fp32 matrices, N=4096: 137 GFLOP, 201 MB moved."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """A single square matrix multiplication."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


N = 4096


def get_inputs():
    A = torch.rand(N, N)
    B = torch.rand(N, N)
    return [A, B]


def get_init_inputs():
    return []
