"""Mean of each row of (8192, 8192) fp32 after removing the row mean: 268 MB read.

A low-signal task: the exact answer is zero, so the reference returns rounding noise far
inside the fp32 tolerance and a kernel that writes zeros would pass a plain allclose.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Row-centred mean."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - x.mean(dim=1, keepdim=True)).mean(dim=1)


rows = 8192
cols = 8192


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
