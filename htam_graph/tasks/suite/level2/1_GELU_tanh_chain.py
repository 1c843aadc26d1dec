"""Tanh-approximated GELU written as a chain of eager ops on a (8192, 8192) fp32 tensor: 537 MB in/out."""

import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), one eager kernel per op."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
        return 0.5 * x * (1.0 + torch.tanh(inner))


batch_size = 8192
dim = 8192


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
