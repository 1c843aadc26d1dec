"""A matrix product with a small output and a long K (split-K territory)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(20, 2100), torch.randn(2100, 24)]


def get_init_inputs():
    return []
