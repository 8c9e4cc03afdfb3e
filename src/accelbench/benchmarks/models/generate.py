"""Text generation with a decoder (GPT-2, LLaMA): prefill and decode measured apart.

One timed call generates `new_tokens` tokens greedily for a batch of `prompt`-token
prompts: the prefill (the whole prompt in one forward pass, filling the KV cache, and
the first token) and then one forward pass per further token on the cache. Figures:

- `tokens`: generated tokens per second over whole calls (batch x new_tokens / time);
- `ttft`: time to first token (the prefill and its token), p50 and p90, from calls timed
  apart, each part synchronised on its own;
- `tpot`: time per output token after the first (decode time / (new_tokens - 1)), p50
  and p90, from the same calls; `decode_tokens` is batch / tpot and `prefill_tokens`
  batch x prompt / ttft.

Before timing, the engine's logits (the prefill's last position and every decode step)
are checked against eager fp32 over the whole generated sequence in one pass, without a
cache (engines.parity): a wrong KV cache path fails the case there. Engines: eager,
compile and compile-max-autotune (dynamic shapes: the cache grows every step);
TorchScript, ONNX Runtime and int8 are measured on single forward passes by
`infer-engine`.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, replace
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.mathmode import math_mode, tf32_worker_env
from accelbench.benchmarks.models import MODEL_SOURCES, checks, engines
from accelbench.benchmarks.models.engines import parity
from accelbench.benchmarks.models.infer import sync
from accelbench.benchmarks.models.memory import PeakMemory
from accelbench.benchmarks.models.params import model_params
from accelbench.benchmarks.models.precision import MATH_OPS, Precision
from accelbench.benchmarks.models.results import _percentile
from accelbench.benchmarks.models.trainer import build_model
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseFailed, CaseResult, CaseSkipped, Figure, Rate
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark

if TYPE_CHECKING:
    from torch import Tensor

GENERATION_ENGINES = (engines.EAGER, engines.COMPILE, engines.MAX_AUTOTUNE)
MIN_CALLS, MAX_CALLS = 3, 200
_SHARED = ("model", "dtype", "batch", "config")
DEFAULT_MODEL = "gpt2-small"


@dataclass(frozen=True)
class GenerateParams:
    """The parameters of a generate case (`BENCHMARK.params`)."""

    model: str
    dtype: str
    batch: int
    config: str
    prompt: int
    new_tokens: int
    engine: str


def measure(ctx: CaseContext, params: GenerateParams) -> CaseResult:
    import torch

    name = params.engine
    if name not in GENERATION_ENGINES:
        raise CaseSkipped(f"generation runs on {', '.join(GENERATION_ENGINES)}; {name} is "
                          "measured on single forward passes by infer-engine")
    prompt, new_tokens = params.prompt, params.new_tokens
    task = checks.model_setup(ctx, params.model, params.config, params.dtype, params.batch,
                              seq=1, image=224).spec
    if task.task != "causal-lm":
        raise CaseSkipped(f"generation needs a decoder language model, not {task.name}")
    setup = checks.model_setup(ctx, params.model, params.config, params.dtype, params.batch,
                               seq=prompt + new_tokens, image=224)
    spec, precision = setup.spec, setup.precision
    device = torch.device(ctx.device.torch_device)
    meter = PeakMemory(torch, device)
    fp32 = Precision("fp32")
    try:
        model = checks.built(torch, spec.name, lambda: build_model(
            torch, replace(setup, precision=fp32), device).eval())
        n_params = sum(p.numel() for p in model.parameters())
        gen = torch.Generator(device="cpu").manual_seed(1000)
        ids = torch.randint(0, spec.shape["vocab"], (setup.batch, prompt),
                            generator=gen).to(device)
        compiled = model if name == engines.EAGER else torch.compile(
            model, mode=None if name == engines.COMPILE else "max-autotune", dynamic=True)
        runner = Decoder(model, compiled)
        autocast = precision.autocast(torch, device.type)

        def generate() -> tuple[Tensor, list[Tensor]]:
            """Greedy generation: the tokens, and the logits each token was chosen from."""
            with autocast:
                out, cache = runner(ids, None)
                logits = [out.logits[:, -1]]
                token = logits[-1].argmax(-1, keepdim=True)
                tokens = [token]
                for _ in range(new_tokens - 1):
                    out, cache = runner(token, cache)
                    logits.append(out.logits[:, -1])
                    token = logits[-1].argmax(-1, keepdim=True)
                    tokens.append(token)
            return torch.cat(tokens, dim=1), logits

        with math_mode(torch, precision.tf32, MATH_OPS, ctx.device.platform) as mode, \
                torch.inference_mode():
            checks.check_math_mode(mode, precision)
            started = time.perf_counter()
            tokens, logits = generate()
            sync(torch, device)
            first_call = time.perf_counter() - started
            check = _parity(torch, model, ids, tokens, logits, name, precision.dtype,
                            ctx.device.platform)
            if not check.ok:
                raise CaseFailed(check.reason())
            started = time.perf_counter()
            generate()
            sync(torch, device)
            steady = time.perf_counter() - started
            del tokens, logits

            timing = ctx.time(generate)
            ttft, tpot = _split_latencies(ctx, runner, ids, new_tokens, autocast)
        peak_memory, memory_details = meter.peak()
    finally:
        model = compiled = runner = ids = None  # type: ignore[assignment]
        if name != engines.EAGER:
            torch._dynamo.reset()

    generated = setup.batch * new_tokens
    figures = [
        Figure("ttft", statistics.median(ttft), "s", higher_is_better=False),
        Figure("ttft_p90", _percentile(sorted(ttft), 90), "s", higher_is_better=False),
    ]
    if tpot:
        figures += [
            Figure("tpot", statistics.median(tpot), "s", higher_is_better=False),
            Figure("tpot_p90", _percentile(sorted(tpot), 90), "s", higher_is_better=False),
            Figure("decode_tokens", setup.batch / statistics.median(tpot), "token/s"),
        ]
    figures.append(Figure("prefill_tokens", setup.batch * prompt / statistics.median(ttft),
                          "token/s"))
    figures.append(Figure("peak_memory", float(peak_memory), "B", higher_is_better=False))
    if name != engines.EAGER:
        figures.append(Figure("compile_time", max(0.0, first_call - steady), "s",
                              higher_is_better=False))
    details = {
        **checks.setup_details(setup, n_params),
        **memory_details,
        "mode": "inference",
        "engine": name,
        "prompt": prompt,
        "new_tokens": new_tokens,
        "decoding": "greedy, KV cache (transformers' DynamicCache), batch without padding",
        "parity": check.to_dict(),
        "tokens": "generated tokens per second over whole calls (prefill included)",
        "split": f"ttft and tpot over {len(ttft)} calls timed part by part",
        "first_call_s": first_call,
    }
    del details["seq"]
    return CaseResult(timing, rates=(Rate("tokens", float(generated), "token/s", over="mean"),),
                      figures=tuple(figures), details=details, time_name="generation_time")


def _parity(torch: ModuleType, model: Any, ids: Tensor, tokens: Tensor, logits: list[Tensor],
            engine: str, dtype: str, platform: str) -> parity.Parity:
    """The engine's chosen-from logits against eager fp32 over the whole sequence, without
    a cache: position prompt-1 gives the first token, and so on."""
    prompt = ids.shape[1]
    with math_mode(torch, False, MATH_OPS, platform):
        full = model(input_ids=torch.cat([ids, tokens[:, :-1]], dim=1)).logits.float()
    reference = full[:, prompt - 1:]
    output = torch.stack([x.float() for x in logits], dim=1)
    return parity.measure(torch, reference, output, parity.tolerance(engine, dtype),
                          classes=True)


class Decoder:
    """One forward pass on the KV cache, in whichever spelling this transformers has
    (`cache` from 5.x, `past_key_values` before): (output, the cache after it)."""

    def __init__(self, model: Any, compiled: Any) -> None:
        import inspect

        self.model = compiled
        self.keyword = ("cache" if "cache" in inspect.signature(model.forward).parameters
                        else "past_key_values")

    def __call__(self, ids: Tensor, cache: Any) -> tuple[Any, Any]:
        given = {self.keyword: cache} if cache is not None else {}
        out = self.model(input_ids=ids, use_cache=True, **given)
        return out, out[self.keyword]


def _split_latencies(ctx: CaseContext, runner: Decoder, ids: Tensor, new_tokens: int,
                     autocast: Any) -> tuple[list[float], list[float]]:
    """Time to first token and time per output token, from calls timed part by part."""
    ttft: list[float] = []
    tpot: list[float] = []
    state: dict[str, Any] = {}

    def prefill() -> None:
        with autocast:
            out, state["cache"] = runner(ids, None)
            state["token"] = out.logits[:, -1].argmax(-1, keepdim=True)

    def decode() -> None:
        with autocast:
            token, cache = state["token"], state["cache"]
            for _ in range(new_tokens - 1):
                out, cache = runner(token, cache)
                token = out.logits[:, -1].argmax(-1, keepdim=True)

    budget = ctx.policy.max_time / 2
    start = ctx.clock.now()
    while len(ttft) < MAX_CALLS and (len(ttft) < MIN_CALLS or ctx.clock.now() - start < budget):
        ttft.append(ctx.clock.time(prefill, 1))
        if new_tokens > 1:
            tpot.append(ctx.clock.time(decode, 1) / (new_tokens - 1))
        state.clear()
    return ttft, tpot


BENCHMARK = Benchmark(
    name="generate",
    family="models",
    summary="Text generation with a KV cache: time to first token, time per output token, "
            "tokens/s",
    entry="accelbench.benchmarks.models.generate:measure",
    params=(
        # A decoder by default: generation needs one (built from its config, random weights).
        *(p for p in model_params(batch=1, model=DEFAULT_MODEL) if p.name in _SHARED),
        Param("prompt", "int", 128, help="prompt tokens (the prefill)", minimum=1),
        Param("new_tokens", "int", 32, help="tokens generated per call", minimum=1,
              maximum=100_000),
        Param("engine", "str", engines.EAGER, help="eager, compile or compile-max-autotune",
              choices=engines.ENGINE_NAMES),
    ),
    devices=("cpu", "cuda"),
    timeout_s=900.0,
    sources=(*MODEL_SOURCES, "accelbench.benchmarks.models.engines.parity"),
    worker_env=tf32_worker_env,
    views=("accelbench.benchmarks.models.view:sections",),
    typed=GenerateParams,
)
