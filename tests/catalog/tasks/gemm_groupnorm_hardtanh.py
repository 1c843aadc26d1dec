"""Linear, GroupNorm over the features, Hardtanh."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(24, 32)
        self.gn = nn.GroupNorm(4, 32)
        self.act = nn.Hardtanh(-2.0, 2.0)

    def forward(self, x):
        return self.act(self.gn(self.fc(x)))


def get_inputs():
    return [torch.randn(19, 24)]


def get_init_inputs():
    return []
