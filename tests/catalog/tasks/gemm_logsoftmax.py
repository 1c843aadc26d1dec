"""A classifier head: Linear with bias, scaled by a temperature, then log-softmax over the classes."""

import torch
import torch.nn as nn

# Small for the CPU simulator; the H200 sweep ran it at 8192 x 128 -> 1000
# (bench/results/gemm-row-2026-12-03-h200/).
batch_size = 70
in_features = 40
num_classes = 300


class Model(nn.Module):
    def __init__(self, in_features: int, num_classes: int, temperature: float):
        super().__init__()
        self.linear = nn.Linear(in_features, num_classes)
        self.temperature = temperature

    def forward(self, x):
        return torch.log_softmax(self.linear(x) / self.temperature, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, num_classes, 0.7]
