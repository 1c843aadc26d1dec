"""Softmax over the last dim of a (16384, 16384) fp16 tensor: 1.07 GB moved."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Row-wise softmax in half precision (PyTorch accumulates in fp32 internally)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


batch_size = 16384
dim = 16384


def get_inputs():
    x = torch.randn(batch_size, dim, dtype=torch.float16)
    return [x]


def get_init_inputs():
    return []
