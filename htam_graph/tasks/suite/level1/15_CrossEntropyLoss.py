"""Mean cross-entropy of (16384, 8192) fp32 logits against int64 class targets: 537 MB read."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """F.cross_entropy with its default mean reduction; returns a 0-dim tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(predictions, targets)


batch_size = 16384
num_classes = 8192


def get_inputs():
    predictions = torch.randn(batch_size, num_classes)
    targets = torch.randint(0, num_classes, (batch_size,))
    return [predictions, targets]


def get_init_inputs():
    return []
