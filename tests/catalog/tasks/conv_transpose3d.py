"""ConvTranspose3d with stride, padding, output padding, dilation, groups and bias."""

import torch
import torch.nn as nn

batch_size = 2
in_channels = 4
out_channels = 8
depth, height, width = 3, 4, 5


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv_transpose3d = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size=(3, 3, 2), stride=(2, 2, 3), padding=(1, 1, 0),
            output_padding=(1, 1, 2), groups=2, dilation=(1, 2, 1),
        )  # fmt: skip

    def forward(self, x):
        return self.conv_transpose3d(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
