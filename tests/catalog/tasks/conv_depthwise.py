"""Depthwise 3x3 convolution (groups = channels) with a bias."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=channels)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 6, 11, 13)]


def get_init_inputs():
    return [6]
