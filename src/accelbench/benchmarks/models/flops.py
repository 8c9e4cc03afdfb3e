"""Model FLOPs: the arithmetic a step needs, by formula, for model FLOPs utilisation.

- Transformer language models (BERT, GPT-2, LLaMA), per token, forward:
  2*N + 4*L*T*d, where N counts the parameters outside embedding lookups (an output
  embedding tied to the input one counts: it is the LM-head matmul), L is the number
  of layers, T the sequence length and d the hidden size; 4*L*T*d is attention's
  scores and weighted sum, counted in full even where a causal kernel skips half
  (the convention of PaLM's MFU). Training is 3x the forward: 6*N + 12*L*T*d.
  Layers that run once per sequence (BERT's pooler and SuperBench's classifier on it)
  count once per sequence: 2*P per sample, not per token.
- LSTM, per sample, forward: T * sum over layers of 8*h*(i + h) (four gates, input and
  recurrent matmuls) plus the head's 2*h*c.
- CNNs, ViT and the UNet: the forward pass counted once by torch.utils.flop_counter on
  the meta device (matmuls, convolutions, attention), nothing allocated; training is 3x.

Model FLOPs are a property of the model and the batch, not of the implementation:
recomputation or skipped work do not change them.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from accelbench.benchmarks.models import zoo

if TYPE_CHECKING:
    from torch import nn

TRAINING_FACTOR = 3  # backward costs about twice the forward


@dataclass(frozen=True)
class ModelFlops:
    forward_per_sample: float
    formula: str

    def per_step(self, samples: int, training: bool) -> float:
        return self.forward_per_sample * samples * (TRAINING_FACTOR if training else 1)


def model_flops(torch: ModuleType, spec: zoo.ModelSpec, module: nn.Module, seq: int,
                image: int) -> ModelFlops:
    """Forward FLOPs of one sample of spec; `module` is the built (unwrapped) model."""
    if spec.is_language_model:
        per_sequence = per_sequence_parameters(module)
        return transformer_flops(matmul_parameters(torch, module) - per_sequence,
                                 spec.shape["layers"], spec.shape["hidden"], seq, per_sequence)
    if spec.arch == "lstm":
        s = spec.shape
        return lstm_flops(s["input"], s["hidden"], s["layers"], s["classes"], seq)
    return counted_flops(torch, spec, image)


def transformer_flops(n_params: int, layers: int, hidden: int, seq: int,
                      per_sequence: int = 0) -> ModelFlops:
    per_token = 2.0 * n_params + 4.0 * layers * seq * hidden
    formula = (f"(2*N + 4*L*T*d) per token, N={n_params}, L={layers}, T={seq}, "
               f"d={hidden}")
    if per_sequence:
        formula += f", + 2*P per sample, P={per_sequence}"
    return ModelFlops(per_token * seq + 2.0 * per_sequence, formula + "; training 3x")


def per_sequence_parameters(module: nn.Module) -> int:
    """Parameters of the layers that run once per sequence (see heads)."""
    modules = getattr(module, "per_sequence_modules", None)
    if modules is None:
        return 0
    return sum(p.numel() for m in modules() for p in m.parameters())


def lstm_flops(inputs: int, hidden: int, layers: int, classes: int, seq: int) -> ModelFlops:
    per_step = sum(8.0 * hidden * ((inputs if i == 0 else hidden) + hidden)
                   for i in range(layers))
    forward = seq * per_step + 2.0 * hidden * classes
    return ModelFlops(forward, "T * sum_layers 8*h*(i+h) + 2*h*c per sample; training 3x")


def matmul_parameters(torch: ModuleType, module: nn.Module) -> int:
    """Parameters that take part in matmuls: all but embedding lookups (a tied head counts)."""
    embeddings = [m.weight for m in module.modules() if isinstance(m, torch.nn.Embedding)]
    total = sum(p.numel() for p in module.parameters())
    looked_up = sum(w.numel() for w in embeddings)
    get_head = getattr(module, "get_output_embeddings", None)  # transformers' models have it
    head = get_head() if get_head is not None else None
    tied = head is not None and any(head.weight is w for w in embeddings)
    return total - looked_up + (head.weight.numel() if head is not None and tied else 0)


def counted_flops(torch: ModuleType, spec: zoo.ModelSpec, image: int) -> ModelFlops:
    """One sample's forward, counted by FlopCounterMode on a meta-device copy of the model."""
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        model = zoo.build(spec, image).eval()  # batch norm takes a batch of one in eval
        if spec.is_unet:
            s = spec.shape
            args: tuple[object, ...] = (torch.empty(1, 4, s["latent"], s["latent"]),
                                        torch.empty(1), torch.empty(1, s["context_len"],
                                                                    s["context"]))
        else:
            args = (torch.empty(1, 3, image, image),)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(*args)
    return ModelFlops(float(counter.get_total_flops()),
                      "forward counted by torch.utils.flop_counter (batch 1); training 3x")
