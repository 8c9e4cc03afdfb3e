"""The tiny model the compile and export checks run: small enough that compiling it on a
CPU takes seconds, with the parts compilers fuse and rewrite (linear layers, GELU, layer
norm, a reduction, a softmax). Imported by those checks inside their worker: it imports
torch."""

from __future__ import annotations

import torch
from torch import nn

BATCH, FEATURES, HIDDEN, OUT = 8, 32, 64, 16


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(FEATURES, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN)
        self.down = nn.Linear(HIDDEN, OUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = nn.functional.gelu(self.up(x))
        h = self.norm(h - h.mean(-1, keepdim=True))
        out: torch.Tensor = self.down(h)
        return out + 4.0 * torch.softmax(out, dim=-1)


def tiny_model() -> Tiny:
    """Seeded weights, whatever the global random state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return Tiny()


def tiny_input(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(BATCH, FEATURES, generator=generator).to(device=device, dtype=dtype)
