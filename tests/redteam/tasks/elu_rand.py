"""ELU (alpha 1) of a (8192, 8192) fp32 tensor on torch.rand inputs, as KernelBench draws
them: on non-negative inputs ELU is the identity, so ReLU would pass for it."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Elementwise ELU."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.elu(x, alpha=1.0)


def get_inputs():
    return [torch.rand(8192, 8192)]


def get_init_inputs():
    return []
