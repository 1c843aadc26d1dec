"""Triplet margin loss (module)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, margin: float = 1.0):
        super().__init__()
        self.loss = nn.TripletMarginLoss(margin=margin)

    def forward(self, anchor, positive, negative):
        return self.loss(anchor, positive, negative)


def get_inputs():
    return [torch.randn(17, 33), torch.randn(17, 33), torch.randn(17, 33)]


def get_init_inputs():
    return []
