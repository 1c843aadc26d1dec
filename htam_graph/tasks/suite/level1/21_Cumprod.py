"""Inclusive prefix product along dim 1 of a (32768, 4096) fp32 tensor near 1: 1.07 GB moved."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """torch.cumprod along one dimension; inputs near 1 keep the products in range."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumprod(x, dim=self.dim)


batch_size = 32768
dim = 4096


def get_inputs():
    x = 1.0 + 0.01 * torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return [1]
