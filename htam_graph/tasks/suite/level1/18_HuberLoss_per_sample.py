"""Per-sample Huber loss (delta=1) of two (8192, 16384) fp32 tensors: 1.07 GB read."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Unreduced Huber loss averaged over each row, one loss per sample (shape (batch,))."""

    def __init__(self, delta: float = 1.0):
        super().__init__()
        self.delta = delta

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.huber_loss(predictions, targets, reduction="none", delta=self.delta).mean(dim=1)


batch_size = 8192
dim = 16384


def get_inputs():
    predictions = torch.randn(batch_size, dim)
    targets = torch.randn(batch_size, dim)
    return [predictions, targets]


def get_init_inputs():
    return [1.0]
