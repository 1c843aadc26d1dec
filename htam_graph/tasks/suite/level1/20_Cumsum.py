"""Inclusive prefix sum along dim 1 of a (16384, 8192) fp32 tensor: 1.07 GB moved."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """torch.cumsum along one dimension."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=self.dim)


batch_size = 16384
dim = 8192


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return [1]
