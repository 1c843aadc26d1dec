"""A.T @ B (A stored K x M: the GEMM reads it transposed) plus a bias row."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b, bias):
        return torch.matmul(a.T, b) + bias


def get_inputs():
    return [torch.randn(37, 36), torch.randn(37, 44), torch.randn(44)]


def get_init_inputs():
    return []
