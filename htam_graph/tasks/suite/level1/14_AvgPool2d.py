"""3x3 average pooling, stride 2, padding 1, of a (32, 64, 256, 256) fp32 tensor: 671 MB moved."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.AvgPool2d; zero padding counts in the average (count_include_pad=True)."""

    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


batch_size = 32
channels = 64
height = 256
width = 256
kernel_size = 3
stride = 2
padding = 1


def get_inputs():
    x = torch.randn(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [kernel_size, stride, padding]
