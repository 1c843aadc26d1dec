"""LayerNorm over the last two dims (1024x1024) of a (64, 1024, 1024) fp32 tensor: 545 MB moved."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.LayerNorm over large rows (1M elements each), with its affine weight and bias."""

    def __init__(self, normalized_shape: tuple[int, ...]):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


batch_size = 64
features = 1024
dim = 1024


def get_inputs():
    x = torch.randn(batch_size, features, dim)
    return [x]


def get_init_inputs():
    return [(features, dim)]
