"""GEMM shapes, written by hand or named after the linear layers of real models.

A named shape is `MODEL.PROJECTION`, optionally `@TOKENS`: the matrix multiply that
projection does in a forward pass, with m = tokens (batch * sequence), n = output
features and k = input features, as `nn.Linear` computes x @ W.T. Without `@TOKENS`
the token count is DEFAULT_TOKENS, a typical training step (e.g. 8 sequences of 512
or 1 of 4096); `@1` to `@16` give decode-sized multiplies.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from accelbench.core.untrusted import is_decimal

DEFAULT_TOKENS = 4096


@dataclass(frozen=True)
class Model:
    """The dimensions of a transformer that fix its projection shapes."""

    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    gated: bool  # SwiGLU: gate and up projections fused into one GEMM of 2*intermediate

    def projections(self) -> dict[str, tuple[int, int]]:
        """Projection name -> (out features n, in features k)."""
        q = self.heads * self.head_dim
        kv = self.kv_heads * self.head_dim
        up = ("gate-up", 2 * self.intermediate) if self.gated else ("ffn-up", self.intermediate)
        return {
            "qkv": (q + 2 * kv, self.hidden),
            "attn-out": (self.hidden, q),
            up[0]: (up[1], self.hidden),
            "ffn-down": (self.hidden, self.intermediate),
        }


def _mha(hidden: int, intermediate: int, heads: int) -> Model:
    return Model(hidden, intermediate, heads, heads, hidden // heads, gated=False)


MODELS: dict[str, Model] = {
    "bert-base": _mha(768, 3072, 12),
    "bert-large": _mha(1024, 4096, 16),
    "gpt2-small": _mha(768, 3072, 12),
    "gpt2-medium": _mha(1024, 4096, 16),
    "gpt2-large": _mha(1280, 5120, 20),
    "gpt2-xl": _mha(1600, 6400, 25),
    # Llama 3.2 1B: grouped-query attention, 32 query heads share 8 key/value heads.
    "llama-1b": Model(2048, 8192, 32, 8, 64, gated=True),
    # Llama 2 7B: full multi-head attention.
    "llama-7b": Model(4096, 11008, 32, 32, 128, gated=True),
}

NAMED_SHAPES: dict[str, tuple[int, int]] = {
    f"{name}.{proj}": nk
    for name, model in MODELS.items()
    for proj, nk in model.projections().items()
}

FORMS = (
    "N (square, e.g. 4096), MxNxK (e.g. 4096x11008x4096), or MODEL.PROJECTION[@TOKENS] "
    f"(e.g. llama-7b.gate-up or gpt2-small.qkv@512; tokens default to {DEFAULT_TOKENS}) with "
    f"MODEL one of {', '.join(MODELS)} and PROJECTION qkv, attn-out, ffn-up "
    "(gate-up for llama), ffn-down"
)

_DIMS = re.compile(r"\d+(?:x\d+x\d+)?")


def shape_names() -> list[str]:
    """Every named shape, in declaration order."""
    return list(NAMED_SHAPES)


def parse_shape(text: str) -> tuple[int, int, int]:
    """(m, n, k) from "4096", "MxNxK" or a named shape; ValueError says what is wrong."""
    spec = text.strip().lower()
    if _DIMS.fullmatch(spec):
        dims = tuple(int(d) for d in spec.split("x"))
        m, n, k = dims * 3 if len(dims) == 1 else dims
        if min(m, n, k) < 1:
            raise ValueError(f"dimensions must be at least 1; use {FORMS}")
        return m, n, k
    name, at, tokens_text = spec.partition("@")
    if name not in NAMED_SHAPES:
        raise ValueError(f"not a GEMM shape; {_hint(name)}use {FORMS}")
    tokens = DEFAULT_TOKENS
    if at:
        if not is_decimal(tokens_text) or int(tokens_text) < 1:
            raise ValueError(f"tokens after '@' must be a positive integer; use {FORMS}")
        tokens = int(tokens_text)
    n, k = NAMED_SHAPES[name]
    return tokens, n, k


def _hint(name: str) -> str:
    model, _, projection = name.partition(".")
    if model in MODELS and projection:
        return f"{model} has projections {', '.join(MODELS[model].projections())}; "
    close = difflib.get_close_matches(name, NAMED_SHAPES, n=1)
    return f"did you mean {close[0]}? " if close else ""


def shape_problem(text: str) -> str | None:
    """Param check: why `text` is not a GEMM shape, or None when it is one."""
    try:
        parse_shape(text)
    except ValueError as e:
        return str(e)
    return None
