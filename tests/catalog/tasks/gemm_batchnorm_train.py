"""Linear, scaled, then BatchNorm1d in training mode (KernelBench level 2 style): the
statistics read the GEMM's output, so fusing the normalization into the GEMM would compute
it twice."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gemm = nn.Linear(24, 40)
        self.bn = nn.BatchNorm1d(40)
        self.scale = nn.Parameter(torch.randn(40))

    def forward(self, x):
        return self.bn(self.gemm(x) * self.scale)


def get_inputs():
    return [torch.randn(33, 24)]


def get_init_inputs():
    return []
