"""Conv3d with an asymmetric kernel, stride 2, padding 1, depth dilation 2, 2 groups and bias."""

import torch
import torch.nn as nn

batch_size = 2
in_channels = 4
out_channels = 8
depth, height, width = 9, 8, 7
kernel_size = (3, 2, 3)


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple[int, int, int]):
        super().__init__()
        self.conv3d = nn.Conv3d(
            in_channels, out_channels, kernel_size, stride=2, padding=1, dilation=(2, 1, 1), groups=2, bias=True
        )

    def forward(self, x):
        return self.conv3d(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
