"""A classifier head: Linear with bias, scaled by a temperature, then log-softmax over the classes."""

import torch
import torch.nn as nn

batch_size = 8192
in_features = 128
num_classes = 1000


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
