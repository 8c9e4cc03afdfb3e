"""The LSTM of the published model charts: stacked LSTM, a linear head on the last step."""

from __future__ import annotations

import torch
from torch import nn


class LSTMClassifier(nn.Module):
    """Classifies a sequence of feature vectors (batch, seq, input) into `classes`."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int, classes: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)
        self.head = nn.Linear(hidden_size, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(out[:, -1, :])
