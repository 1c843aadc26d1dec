"""Dropout in training mode is random (not in the catalog)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(x) + 1.0


def get_inputs():
    return [torch.randn(8, 8)]


def get_init_inputs():
    return []
