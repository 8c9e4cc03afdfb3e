"""SuperBench's classification heads on the transformer language models.

SuperBench trains BERT, GPT-2 and LLaMA not on their language-modelling tasks but as
classifiers of whole sequences into `num_classes` (100) classes, with cross-entropy
against random labels:

- BERT: transformers' BertModel (with its pooler), and a linear layer on the pooled
  output (the first token's last hidden state through the pooler's dense layer and tanh).
- GPT-2 and LLaMA: GPT2Model / LlamaModel, a linear layer applied to the last hidden
  state of every position, and the last position's outputs taken as the class scores.
"""

from __future__ import annotations

import torch
from torch import nn


class PooledClassifier(nn.Module):
    """An encoder's pooled output into a linear layer of `classes` outputs (BERT)."""

    def __init__(self, encoder: nn.Module, hidden_size: int, classes: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(hidden_size, classes)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(input_ids).pooler_output)

    def per_sequence_modules(self) -> tuple[nn.Module, ...]:
        """The layers that run once per sequence, not once per token (for FLOP counts)."""
        pooler = getattr(self.encoder, "pooler", None)
        return (self.head,) if pooler is None else (pooler, self.head)


class LastPositionClassifier(nn.Module):
    """A linear layer of `classes` outputs over a decoder's last hidden state; the last
    position's outputs are the class scores (GPT-2, LLaMA)."""

    def __init__(self, decoder: nn.Module, hidden_size: int, classes: int) -> None:
        super().__init__()
        self.decoder = decoder
        self.head = nn.Linear(hidden_size, classes)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        scores = self.head(self.decoder(input_ids).last_hidden_state)
        # Indexed as SuperBench indexes it (a host-side range of the batch's rows).
        return scores[range(scores.shape[0]), -1]

    def per_sequence_modules(self) -> tuple[nn.Module, ...]:
        return ()
