"""Transpose of a (8192, 8192) fp32 matrix into new memory: 537 MB moved."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Out-of-place transpose: the result is a new contiguous tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.t().contiguous()


n = 8192


def get_inputs():
    return [torch.randn(n, n)]


def get_init_inputs():
    return []
