"""Max over the last dim of a (128, 1024, 2048) fp32 tensor: 1.07 GB read."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Max reduction over one (contiguous) dimension; returns the values only."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max(x, dim=self.dim)[0]


batch_size = 128
dim1 = 1024
dim2 = 2048
reduce_dim = 2


def get_inputs():
    x = torch.randn(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [reduce_dim]
