"""torch.multiply and torch.subtract called positionally (aliases of mul and sub), as in a mish written by hand."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x, y):
        return torch.subtract(torch.multiply(torch.tanh(F.softplus(x)), x), y)


def get_inputs():
    return [torch.randn(4, 300), torch.randn(4, 300)]


def get_init_inputs():
    return []
