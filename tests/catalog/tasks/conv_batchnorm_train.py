"""Conv2d, then BatchNorm2d in training mode without affine parameters, then tanh (KernelBench level 2 style)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8, affine=False)

    def forward(self, x):
        return torch.tanh(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(2, 3, 10, 12)]


def get_init_inputs():
    return []
