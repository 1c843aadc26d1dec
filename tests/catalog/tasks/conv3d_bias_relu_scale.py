"""Conv3d, a bias parameter added per channel, ReLU, then a scale: the epilogue fused into the convolution."""

import torch
import torch.nn as nn

batch_size = 2
in_channels = 3
out_channels = 8
depth, height, width = 6, 7, 8
kernel_size = 3
bias_shape = (out_channels, 1, 1, 1)


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple[int, ...]):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return torch.relu(self.conv(x) + self.bias) * 0.5


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
