"""The parameters of a `serve-llm` case, declared once and checked on the way in (no torch,
no aiohttp: declarations import this).

A case is one engine serving one model under one load: `requests` measured requests of
`input_len` prompt tokens and `output_len` output tokens, arriving at `rate` per second
(0: as fast as `concurrency` lets them; Poisson, or burstier with `burstiness` < 1 as
vLLM's gamma arrivals), at most `concurrency` in flight, the rate reaching its value over
`ramp_up` seconds; after warm-up requests at least as many as the concurrency. `slo` holds
the bounds goodput is judged by; `sweep` measures several loads in one case and finds the
highest that still meets the SLO.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from accelbench.core.params import DEFAULT, Param

INPROCESS, TRANSFORMERS_SERVE, VLLM, URL = "inprocess", "transformers-serve", "vllm", "url"
ENGINES = (INPROCESS, TRANSFORMERS_SERVE, VLLM, URL)
# Engines accelbench starts itself (a server process), as against reached or in process.
STARTED = (TRANSFORMERS_SERVE, VLLM)
# LLaMA-shaped configurations built with seeded random weights (engines.model_dir); never
# downloaded.
MODELS = ("llama-tiny", "llama-1b", "llama-8b")
APIS = ("completions", "chat")
DTYPES = ("fp32", "bf16", "fp16")


@dataclass(frozen=True)
class _ParsedBy:
    """A parameter check that parses the text with `entry` ("module:attribute", imported
    when first checked): its ValueError's line is the problem. A class rather than a
    closure: a case's parameters travel to its worker process pickled."""

    entry: str
    empty_ok: bool = False

    def __call__(self, text: Any) -> str | None:
        if self.empty_ok and not str(text):
            return None
        module, _, name = self.entry.partition(":")
        parse: Any = importlib.import_module(module)
        for part in name.split("."):
            parse = getattr(parse, part)
        try:
            parse(str(text))
        except ValueError as exc:
            return str(exc)
        return None


_lengths = _ParsedBy("accelbench.benchmarks.llm.workload:Lengths.parse")
_slo = _ParsedBy("accelbench.benchmarks.llm.metrics:SLO.parse")
_sweep = _ParsedBy("accelbench.benchmarks.llm.sweep:parse_sweep", empty_ok=True)


def _url(text: Any) -> str | None:
    value = str(text)
    if value and not value.startswith(("http://", "https://")):
        return f"url {value!r} is not an http:// or https:// address"
    if "@" in value.partition("://")[2].partition("/")[0]:
        return ("url: give no credentials in the address; put the token in an environment "
                "variable and name it with api_key_env")
    return None


@dataclass(frozen=True)
class ServeLLMParams:
    """The parameters of a serve-llm case (`BENCHMARK.params`)."""

    model: str
    engine: str
    dtype: str
    api: str
    requests: int
    warmup: int
    concurrency: int
    rate: float
    burstiness: float
    ramp_up: float
    input_len: str
    output_len: str
    shared_prefix: int
    slo: str
    sweep: str
    request_timeout: float
    stall_timeout: float
    ready_timeout: float
    canary: bool
    keep_text: bool
    loadgen: bool = False
    url: str = ""
    served_model: str = ""
    api_key_env: str | None = None
    engine_python: str | None = None
    engine_args: str = ""


_URL_ONLY = ("engine", (URL,))
_STARTED_ONLY = ("engine", STARTED)

PARAMS = (
    Param("model", "str", "llama-tiny", choices=MODELS,
          help="LLaMA-shaped configuration with random weights (llama-tiny for CPUs)"),
    Param("engine", "str", INPROCESS, choices=ENGINES,
          help="inprocess (transformers' continuous batching here), transformers-serve or "
               "vllm (a server started for the case), url (a running OpenAI-compatible "
               "server)"),
    Param("dtype", "str", "fp32", choices=DTYPES, help="the engine's dtype"),
    Param("api", "str", "completions", choices=APIS,
          help="streaming /v1/completions or /v1/chat/completions", quiet_default=True),
    Param("requests", "int", 64, minimum=1, maximum=100_000,
          help="measured requests per load"),
    Param("warmup", "int", 0, minimum=0, maximum=10_000,
          help="warm-up requests first, not measured (0: as many as the concurrency, "
               "at least 2)", quiet_default=True),
    Param("concurrency", "int", 4, minimum=0, maximum=100_000,
          help="most requests in flight at once (0: unlimited)"),
    Param("rate", "float", 0.0, minimum=0.0,
          help="requests per second arriving (0: all at once, held by the concurrency)",
          quiet_default=True),
    Param("burstiness", "float", 1.0, minimum=0.01, maximum=100.0,
          help="gamma shape of the gaps between arrivals (1: Poisson; lower: burstier)",
          quiet_default=True),
    Param("ramp_up", "float", 0.0, minimum=0.0,
          help="seconds over which the rate rises to its value", quiet_default=True),
    Param("input_len", "str", "128", check=_lengths,
          help="prompt tokens: N, uniform:LO-HI or normal:MEAN,SD"),
    Param("output_len", "str", "64", check=_lengths,
          help="output tokens: N, uniform:LO-HI or normal:MEAN,SD"),
    Param("shared_prefix", "int", 0, minimum=0,
          help="tokens every prompt starts with (a shared system prompt)", quiet_default=True),
    Param("slo", "str", "ttft:500ms,tpot:50ms", check=_slo, grid=False,
          help="bounds goodput is judged by: ttft:T,tpot:T,e2e:T"),
    Param("sweep", "str", "", check=_sweep, grid=False,
          help="loads measured in turn: concurrency=1,2,4 or rate=1,2,4 ('': one load)"),
    Param("request_timeout", "float", 120.0, minimum=0.1,
          help="seconds a request may take in all before it counts as failed", quiet_default=True),
    Param("stall_timeout", "float", 30.0, minimum=0.1,
          help="seconds a stream may stay silent before its request counts as failed",
          quiet_default=True),
    Param("ready_timeout", "float", 600.0, minimum=1.0,
          help="seconds a started engine has to answer its health check", quiet_default=True),
    Param("canary", "bool", True,
          help="check the engine's greedy output against eager PyTorch first", quiet_default=True),
    Param("keep_text", "bool", False,
          help="store the first requests' prompt and output text in the record",
          quiet_default=True),
    Param("loadgen", "bool", False, quiet_default=True,
          help="also run MLPerf LoadGen's Server scenario with token latencies at the "
               "load's request rate, its figures beside the family's own"),
    Param("url", "str", "", check=_url, only_when=_URL_ONLY, outside=DEFAULT,
          help="the running server's base URL (engine=url)"),
    Param("served_model", "str", "", only_when=_URL_ONLY, outside=DEFAULT,
          help="the model name to request (engine=url; '': the one it lists)"),
    Param("api_key_env", "str", "", only_when=_URL_ONLY,
          help="environment variable holding the server's API key (never stored)"),
    Param("engine_python", "str", "", only_when=_STARTED_ONLY, grid=False,
          help="interpreter of the engine's own environment ('': this one)"),
    Param("engine_args", "str", "", only_when=_STARTED_ONLY, outside=DEFAULT, grid=False,
          help="extra options for the started server, as on its command line"),
)
