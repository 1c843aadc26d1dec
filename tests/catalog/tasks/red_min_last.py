"""min over the last dim (values only) of a 3-D tensor."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.min(x, dim=2)[0]


def get_inputs():
    return [torch.randn(5, 6, 301)]


def get_init_inputs():
    return []
