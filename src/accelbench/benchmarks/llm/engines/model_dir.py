"""Local model folders that every engine can load, made here and never downloaded: a
LLaMA configuration of a named shape, seeded random weights, and a word-level tokenizer
whose tokens are the words "w0", "w1", ... so that a prompt of N words is N tokens on
every engine.

The generation config sets no end-of-sequence token, so generation always runs to the
request's `max_tokens` (random weights would otherwise stop at random lengths). The
folder is cached under the user's cache directory, keyed by the shape, the seed and the
versions that decide its bytes, and written into a temporary folder first and renamed,
so concurrent processes never see half of one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

# Bump when what a folder holds changes (the key of the cache then changes too).
# 1: config, generation config, word-level tokenizer, seeded random weights.
FORMAT = 1

# Special tokens come first; every other id is a plain word safe to put in a prompt.
SPECIALS = ("<unk>", "<s>", "</s>")
FIRST_WORD = len(SPECIALS)

# Any message list becomes its contents joined by spaces: no role markers, so a chat
# request's prompt is as many tokens as its words.
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['content'] }}"
                 "{% if not loop.last %} {% endif %}{% endfor %}")


@dataclass(frozen=True)
class ModelConfig:
    """The shape of a LLaMA model; `dtype` is the one its weights are stored in."""

    vocab: int
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    dtype: str = "bfloat16"
    tie_embeddings: bool = False
    max_positions: int = 131072
    rope_theta: float = 500000.0
    llama3_rope: bool = True
    head_dim: int | None = None  # None: hidden // heads

    def to_hf(self) -> dict[str, Any]:
        """The `config.json` of a `LlamaForCausalLM` of this shape (no end-of-sequence id)."""
        config: dict[str, Any] = {
            "architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "vocab_size": self.vocab, "hidden_size": self.hidden,
            "intermediate_size": self.intermediate, "num_hidden_layers": self.layers,
            "num_attention_heads": self.heads, "num_key_value_heads": self.kv_heads,
            "head_dim": self.head_dim or self.hidden // self.heads, "hidden_act": "silu",
            "max_position_embeddings": self.max_positions, "rms_norm_eps": 1e-5,
            "initializer_range": 0.02, "attention_bias": False, "mlp_bias": False,
            "tie_word_embeddings": self.tie_embeddings, "bos_token_id": 1,
            "eos_token_id": None, "pad_token_id": None, "use_cache": True,
            "torch_dtype": self.dtype, "rope_theta": self.rope_theta,
        }
        if self.llama3_rope:
            config["rope_scaling"] = {"rope_type": "llama3", "factor": 32.0,
                                      "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                      "original_max_position_embeddings": 8192}
        return config


MODEL_CONFIGS: dict[str, ModelConfig] = {
    # Seconds to make and serve on a CPU: the tests' and the quick runs' model. Its heads
    # are 32 wide (not 64 / 4), the narrowest vLLM's CPU attention takes.
    "llama-tiny": ModelConfig(vocab=512, hidden=64, intermediate=128, layers=2, heads=4,
                              kv_heads=2, dtype="float32", max_positions=4096,
                              rope_theta=10000.0, llama3_rope=False, head_dim=32),
    # Llama 3.2 1B's shape.
    "llama-1b": ModelConfig(vocab=128256, hidden=2048, intermediate=8192, layers=16,
                            heads=32, kv_heads=8, tie_embeddings=True),
    # Llama 3.1 8B's shape.
    "llama-8b": ModelConfig(vocab=128256, hidden=4096, intermediate=14336, layers=32,
                            heads=32, kv_heads=8),
}


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "none"


def cache_key(name: str, *, weights: bool, seed: int) -> str:
    """What decides a folder's bytes: its shape, seed, format and the libraries that write
    it (torch's generator draws the weights)."""
    parts = {"format": FORMAT, "name": name, "config": MODEL_CONFIGS[name].to_hf(),
             "seed": seed, "weights": weights, "torch": _version("torch"),
             "transformers": _version("transformers"), "tokenizers": _version("tokenizers")}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:12]


def default_root() -> Path:
    from platformdirs import user_cache_path

    return user_cache_path("accelbench") / "llm-models"


def model_dir(name: str, *, weights: bool = True, seed: int = 0,
              root: Path | None = None) -> Path:
    """The folder of model `name` (one of MODEL_CONFIGS), made on first use. Without
    `weights` it has no weight files (for engines that make their own, such as vLLM's
    `--load-format dummy`)."""
    if name not in MODEL_CONFIGS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODEL_CONFIGS)}")
    root = default_root() if root is None else Path(root)
    kind = "" if weights else "-noweights"
    final = root / f"{name}-seed{seed}{kind}-{cache_key(name, weights=weights, seed=seed)}"
    if (final / "config.json").is_file():
        return final
    root.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=root))
    try:
        _write(temporary, MODEL_CONFIGS[name], weights=weights, seed=seed)
        try:
            os.rename(temporary, final)
        except OSError:
            if not (final / "config.json").is_file():  # not another process's folder
                raise
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return final


def _write(folder: Path, config: ModelConfig, *, weights: bool, seed: int) -> None:
    (folder / "config.json").write_text(json.dumps(config.to_hf(), indent=2) + "\n")
    generation = {"bos_token_id": 1, "eos_token_id": None, "pad_token_id": None,
                  "do_sample": False}
    (folder / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    _write_tokenizer(folder, config.vocab)
    if weights:
        _write_weights(folder, config, seed)


def _write_tokenizer(folder: Path, vocab: int) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    words = {token: i for i, token in enumerate(SPECIALS)}
    words.update({f"w{i}": i for i in range(FIRST_WORD, vocab)})
    tokenizer = Tokenizer(models.WordLevel(vocab=words, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins with spaces
    tokenizer.save(str(folder / "tokenizer.json"))
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>",
        "bos_token": "<s>", "add_bos_token": False, "add_eos_token": False,
        "clean_up_tokenization_spaces": False, "model_max_length": 1 << 20,
        "chat_template": CHAT_TEMPLATE,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n")
    (folder / "special_tokens_map.json").write_text(
        json.dumps({"unk_token": "<unk>", "bos_token": "<s>"}, indent=2) + "\n")


def _write_weights(folder: Path, config: ModelConfig, seed: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    hf = config.to_hf()
    dtype = getattr(torch, config.dtype)
    previous = torch.get_default_dtype()
    torch.manual_seed(seed)
    torch.set_default_dtype(dtype)  # big shapes are drawn in their own dtype, not float32
    try:
        model = LlamaForCausalLM(LlamaConfig(**hf))
    finally:
        torch.set_default_dtype(previous)
    model.to(dtype).save_pretrained(folder, safe_serialization=True)
    # save_pretrained writes its own configs: keep ours, which say no end-of-sequence id.
    (folder / "config.json").write_text(json.dumps(hf, indent=2) + "\n")
    generation = {"bos_token_id": 1, "eos_token_id": None, "pad_token_id": None,
                  "do_sample": False}
    (folder / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")


def prompt_token_ids(folder: Path) -> list[int]:
    """The ids a prompt may hold: every word, no special token."""
    vocab = int(json.loads((Path(folder) / "config.json").read_text())["vocab_size"])
    return list(range(FIRST_WORD, vocab))


def text_of(ids: Sequence[int]) -> str:
    """The prompt text of token ids of a model folder: each id's word, space-separated."""
    return " ".join(f"w{i}" for i in ids)


def ids_of(text: str) -> list[int]:
    """The ids of a text made of this tokenizer's words (the inverse of `text_of`)."""
    ids = []
    for word in text.split():
        if word.startswith("w") and word[1:].isdigit():
            ids.append(int(word[1:]))
        else:
            ids.append(SPECIALS.index(word) if word in SPECIALS else 0)
    return ids


def quiet_loading() -> None:
    """No progress bar from transformers while a model folder loads: a run's terminal
    shows accelbench's own progress, not a bar per weight file per process."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
