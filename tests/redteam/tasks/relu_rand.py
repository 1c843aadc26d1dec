"""ReLU of a (8192, 8192) fp32 tensor drawn as KernelBench's level 1 ReLU draws it:
torch.rand, so every input is already non-negative and x is its own ReLU."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Elementwise ReLU."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.rand(8192, 8192)]


def get_init_inputs():
    return []
