"""Exact (erf) GELU of a (8192, 16384) fp32 tensor: 1.07 GB moved."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """GELU with PyTorch's default erf formulation."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)


batch_size = 8192
dim = 16384


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
