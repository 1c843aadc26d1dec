"""Per-sample KL(targets || predictions) of two (8192, 8192) fp32 distributions: 537 MB read."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """F.kl_div on log-probabilities, unreduced, summed over each row (shape (batch,))."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.kl_div(torch.log(predictions), targets, reduction="none").sum(dim=1)


batch_size = 8192
dim = 8192


def get_inputs():
    predictions = torch.randn(batch_size, dim).softmax(dim=-1)
    targets = torch.randn(batch_size, dim).softmax(dim=-1)
    return [predictions, targets]


def get_init_inputs():
    return []
