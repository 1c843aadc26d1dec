"""Mean over the middle dim of a (256, 1024, 1024) fp32 tensor: 1.07 GB read."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean reduction over one (strided) dimension, which is removed."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=self.dim)


batch_size = 256
dim1 = 1024
dim2 = 1024
reduce_dim = 1


def get_inputs():
    x = torch.rand(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [reduce_dim]
