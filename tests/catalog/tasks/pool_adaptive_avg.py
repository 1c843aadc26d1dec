"""Global average pooling followed by a ReLU."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d((1, 1))

    def forward(self, x):
        return torch.relu(self.pool(x) - 0.1)


def get_inputs():
    return [torch.randn(3, 8, 7, 9)]


def get_init_inputs():
    return []
