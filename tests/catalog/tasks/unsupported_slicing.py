"""Slicing a column out of the input (not in the catalog)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x[:, 0])


def get_inputs():
    return [torch.randn(8, 8)]


def get_init_inputs():
    return []
