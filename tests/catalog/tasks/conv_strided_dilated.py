"""An asymmetric kernel with stride and dilation, no bias, then a scale."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, (3, 5), stride=2, padding=(1, 2), dilation=(2, 1), bias=False)

    def forward(self, x):
        return self.conv(x) * 0.5


def get_inputs():
    return [torch.randn(2, 3, 19, 23)]


def get_init_inputs():
    return []
