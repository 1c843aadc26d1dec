"""ConvTranspose1d with stride and padding, no bias (the functional form)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(3, 8, 5) * 0.2)

    def forward(self, x):
        return F.conv_transpose1d(x, self.weight, stride=2, padding=2)


def get_inputs():
    return [torch.randn(2, 3, 11)]


def get_init_inputs():
    return []
