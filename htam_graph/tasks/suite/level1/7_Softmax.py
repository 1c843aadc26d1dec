"""Softmax over the last dim of a (4096, 32768) fp32 tensor: 1.07 GB moved."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Row-wise softmax."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


batch_size = 4096
dim = 32768


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
