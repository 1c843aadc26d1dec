"""ConvTranspose2d with stride, padding, output padding, dilation, groups and bias, then a ReLU."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose2d(
            4, 6, kernel_size=(3, 2), stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2, dilation=(2, 1)
        )

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(2, 4, 5, 7)]


def get_init_inputs():
    return []
