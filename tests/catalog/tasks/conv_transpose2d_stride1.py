"""A stride-1 transposed 2-D convolution with padding, dilation and bias, then tanh: the
shared-memory tiles compute it as the plain convolution of the flipped kernel."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose2d(5, 7, kernel_size=(3, 4), padding=(1, 2), dilation=(1, 2))

    def forward(self, x):
        return torch.tanh(self.conv(x))


def get_inputs():
    return [torch.randn(2, 5, 9, 13)]


def get_init_inputs():
    return []
