"""BatchNorm1d in eval mode on (N, C, L): the running statistics, then a ReLU."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(6, eps=1e-3)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1.0, 1.0)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.uniform_(0.5, 1.5)
        self.bn.eval()

    def forward(self, x):
        return torch.relu(self.bn(x))


def get_inputs():
    return [torch.randn(4, 6, 33)]


def get_init_inputs():
    return []
