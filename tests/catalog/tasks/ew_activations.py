"""A chain of activations with parameters: elu, hardtanh, leaky_relu, softplus, mish."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, slope: float):
        super().__init__()
        self.slope = slope

    def forward(self, x):
        y = F.elu(x, alpha=0.7)
        y = F.hardtanh(y, min_val=-0.5, max_val=2.0) + F.softplus(x, beta=2.0, threshold=5.0)
        return F.leaky_relu(y, self.slope) * F.mish(x) - torch.sigmoid(x) / 3.0


def get_inputs():
    return [torch.randn(33, 47)]


def get_init_inputs():
    return [0.2]
