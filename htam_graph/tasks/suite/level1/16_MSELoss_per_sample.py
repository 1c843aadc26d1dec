"""Per-sample mean squared error of two (8192, 16384) fp32 tensors: 1.07 GB read."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Unreduced MSE averaged over each row, one loss per sample (shape (batch,))."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(predictions, targets, reduction="none").mean(dim=1)


batch_size = 8192
dim = 16384


def get_inputs():
    predictions = torch.randn(batch_size, dim)
    targets = torch.randn(batch_size, dim)
    return [predictions, targets]


def get_init_inputs():
    return []
