"""A batch of matrices times one matrix (broadcast), then a logsumexp per row."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.logsumexp(torch.matmul(a, b), dim=-1, keepdim=True)


def get_inputs():
    return [torch.randn(3, 17, 20), torch.randn(20, 27)]


def get_init_inputs():
    return []
