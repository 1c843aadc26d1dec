"""Log-softmax over dim 1 of a (8192, 16384) fp32 tensor: 1.07 GB moved."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Row-wise log-softmax."""

    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=self.dim)


batch_size = 8192
dim = 16384


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return [1]
