"""Conv1d with stride and padding, then tanh."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, 3, stride=2, padding=1)

    def forward(self, x):
        return torch.tanh(self.conv(x))


def get_inputs():
    return [torch.randn(2, 4, 37)]


def get_init_inputs():
    return [4, 6]
