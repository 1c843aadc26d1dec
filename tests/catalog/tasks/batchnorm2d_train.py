"""BatchNorm2d in training mode (batch statistics), with a non-trivial affine transform."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(4)
        with torch.no_grad():
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-1.0, 1.0)

    def forward(self, x):
        return self.bn(x)


def get_inputs():
    return [torch.randn(3, 4, 7, 9) * 2.0 + 0.5]


def get_init_inputs():
    return []
