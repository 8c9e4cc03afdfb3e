"""Does the engine compute what the model computes? Its greedy output for a few fixed
prompts is checked against eager PyTorch on the same weights (loaded from the model
folder), so that a wrong-but-fast engine never scores.

Eager PyTorch reads each prompt followed by the engine's own tokens in one forward pass
(teacher forcing), and at every step compares the engine's token with eager's argmax at
the same prefix. A different token where eager's top-2 logit margin exceeds `tolerance`
fails the canary: the engine is wrong. A different token at a near-tie (margin within
the tolerance) is what rounding in another kernel or dtype does; it is accepted and said.
Teacher forcing keeps one near-tie from turning the rest of the output into mismatches.
"""

from __future__ import annotations

import http.client
import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench.benchmarks.llm.engines.endpoint import Endpoint

PROMPT_LENGTHS = (8, 16, 24)
PROMPT_SEED = 20240607


@dataclass(frozen=True)
class CanaryResult:
    """`ok`: the engine agreed with eager PyTorch (or the check was `skipped`);
    `detail`: one line that says what was seen; `prompts` and `tokens`: how many prompts
    and generated tokens were compared; `near_ties`: mismatches accepted at near-ties."""

    ok: bool
    detail: str
    prompts: int = 0
    tokens: int = 0
    skipped: bool = False
    near_ties: int = 0
    mismatches: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "detail": self.detail, "prompts": self.prompts,
                "tokens": self.tokens, "skipped": self.skipped, "near_ties": self.near_ties}


def canary_prompts(vocab: int, first_word: int = 3) -> list[list[int]]:
    """The fixed prompts: seeded random words, one prompt per length of PROMPT_LENGTHS."""
    import numpy as np

    rng = np.random.default_rng(PROMPT_SEED)
    return [[int(i) for i in rng.integers(first_word, vocab, size=n)] for n in PROMPT_LENGTHS]


def _complete(endpoint: Endpoint, prompt: str, max_tokens: int, timeout: float,
              api_key_env: str | None) -> str:
    body = {"model": endpoint.model, "prompt": prompt, "max_tokens": max_tokens,
            "temperature": 0, "stream": False, **endpoint.extra_body}
    request = urllib.request.Request(endpoint.url + "/v1/completions",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    token = os.environ.get(api_key_env) if api_key_env else None
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        answer = json.loads(response.read())
    return str(answer["choices"][0]["text"])


def check(endpoint: Endpoint, *, max_tokens: int = 16, tolerance: float | None = None,
          timeout: float = 120.0, api_key_env: str | None = None,
          device: str = "cpu") -> CanaryResult:
    """The engine's greedy completions of the fixed prompts against eager PyTorch on
    `device`. `tolerance` is the top-2 logit margin under which a different token is a
    near-tie (default: 1e-3 for a float32 engine, 0.1 for a lower precision)."""
    folder = endpoint.weights
    if folder is None or not any(Path(folder).glob("*.safetensors")):
        why = "dummy weights" if endpoint.options.get("weights") is False else \
            "its weights are not local"
        return CanaryResult(True, f"skipped: {endpoint.name} serves {why}", skipped=True)
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))
    config = json.loads((Path(folder) / "config.json").read_text())
    if tolerance is None:
        dtype = str(endpoint.options.get("dtype", "auto"))
        if dtype == "auto":
            dtype = str(config.get("torch_dtype") or config.get("dtype") or "float32")
        tolerance = 1e-3 if dtype == "float32" else 0.1
    prompts = canary_prompts(int(config["vocab_size"]))
    outputs: list[list[int]] = []
    for ids in prompts:
        text = tokenizer.decode(ids)
        try:
            answer = _complete(endpoint, text, max_tokens, timeout, api_key_env)
        except (OSError, ValueError, KeyError, IndexError, TypeError,
                http.client.HTTPException) as e:
            return CanaryResult(False, f"the engine did not complete a canary prompt: "
                                       f"{' '.join(str(e).split())[:200]}", len(prompts))
        outputs.append(tokenizer.encode(answer, add_special_tokens=False).ids)
    return compare(Path(folder), prompts, outputs, max_tokens=max_tokens,
                   tolerance=tolerance, device=eager_device(Path(folder), device))


def eager_device(folder: Path, device: str, free_bytes: int | None = None) -> str:
    """Where eager PyTorch runs: on `device` when a float32 copy of the weights fits in
    its free memory beside the engine (which may hold most of it: its KV cache), else on
    the CPU. `free_bytes`: the device's free memory (default: asked)."""
    if device == "cpu":
        return device
    config = json.loads((folder / "config.json").read_text())
    stored = 2 if str(config.get("torch_dtype")) in ("bfloat16", "float16") else 4
    weights = sum(f.stat().st_size for f in folder.glob("*.safetensors"))
    needed = weights * 4 // stored * 5 // 4  # float32, and a quarter more for activations
    if free_bytes is None:
        try:
            import torch

            free_bytes = int(torch.cuda.mem_get_info(torch.device(device))[0])
        except (RuntimeError, ValueError, AssertionError):
            return "cpu"
    return device if free_bytes >= needed else "cpu"


def compare(folder: Path, prompts: list[list[int]], outputs: list[list[int]], *,
            max_tokens: int, tolerance: float, device: str = "cpu") -> CanaryResult:
    """Each engine output against eager PyTorch's greedy choice at each of its steps."""
    import torch
    from transformers import AutoModelForCausalLM

    from accelbench.benchmarks.llm.engines.model_dir import quiet_loading

    quiet_loading()
    model: Any = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                                      attn_implementation="eager")
    model.to(device).eval()
    tokens = near_ties = 0
    wrong: list[str] = []
    short: list[str] = []
    for p, (prompt, output) in enumerate(zip(prompts, outputs, strict=True)):
        if len(output) != max_tokens:
            short.append(f"prompt {p} gave {len(output)} tokens of {max_tokens}")
        if not output:
            continue
        sequence = torch.tensor([prompt + output], device=device)
        with torch.no_grad():
            logits = model(sequence).logits[0, len(prompt) - 1:-1].float()
        top = torch.topk(logits, 2, dim=-1)
        for step, token in enumerate(output):
            tokens += 1
            expected = int(top.indices[step, 0])
            if token == expected:
                continue
            margin = float(top.values[step, 0] - top.values[step, 1])
            if margin > tolerance:
                wrong.append(f"prompt {p} step {step}: engine {token}, eager {expected} "
                             f"(margin {margin:.3g})")
            else:
                near_ties += 1
    del model
    count = len(prompts)
    if wrong or short:
        first = (wrong + short)[0]
        return CanaryResult(False, f"the engine disagrees with eager PyTorch at "
                                   f"{len(wrong)} of {tokens} steps beyond a near-tie "
                                   f"(tolerance {tolerance:g}); first: {first}",
                            count, tokens, near_ties=near_ties, mismatches=wrong + short)
    said = f", {near_ties} near-tie(s) accepted" if near_ties else ""
    return CanaryResult(True, f"{tokens} greedy tokens of {count} prompts agree with eager "
                              f"PyTorch on {device}{said}", count, tokens,
                        near_ties=near_ties)
