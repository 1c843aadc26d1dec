"""GroupNorm with its affine weight and bias."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, groups: int, channels: int):
        super().__init__()
        self.gn = nn.GroupNorm(groups, channels)

    def forward(self, x):
        return self.gn(x)


def get_inputs():
    return [torch.randn(3, 16, 5, 7)]


def get_init_inputs():
    return [4, 16]
