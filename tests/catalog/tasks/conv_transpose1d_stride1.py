"""A stride-1 transposed 1-D convolution whose padding is larger than its kernel's reach
(the flipped kernel's padding is negative), over a long row: one row of shared-memory tile."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 6, 3) * 0.3)

    def forward(self, x):
        return F.conv_transpose1d(x, self.weight, padding=3)


def get_inputs():
    return [torch.randn(2, 4, 300)]


def get_init_inputs():
    return []
