"""Does the harness slow down the training it measures?

Trains one small BERT two ways in the same process, alternating rounds so that drift of
the machine hits both alike: accelbench's `train` benchmark (the full in-process case
path: adaptive timing, windows of steps, checks) and a plain training loop written
here by hand with transformers and torch only (same model, batch, precision and
optimizer; one synchronisation at the end). Prints samples/s of each per round, the
ratio accelbench / plain, its median (target: at least 0.97), and the spread of each
method across rounds.

    python bench/model_overhead.py [--device auto] [--dtype fp32] [--rounds 5] [--threads N]
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from _rounds import alternate, measured, verdict

if TYPE_CHECKING:
    from accelbench.core.device import DeviceInfo
    from accelbench.core.registry import Benchmark
    from accelbench.core.timing import TimingPolicy

TARGET = 0.97
# A small BERT: BERT-base's vocabulary and layout at a quarter of its width, two layers.
SHAPE = {"layers": 2, "hidden": 256, "heads": 4, "intermediate": 1024}


def plain_loop(device: Any, dtype: str, batch: int, seq: int, seconds: float) -> float:
    """Samples per second of a hand-written masked-LM training loop."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    config = BertConfig(hidden_size=SHAPE["hidden"], num_hidden_layers=SHAPE["layers"],
                        num_attention_heads=SHAPE["heads"],
                        intermediate_size=SHAPE["intermediate"])
    model = BertForMaskedLM(config).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    half = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(dtype)
    scaler = torch.amp.GradScaler(device.type) if dtype == "fp16" else None

    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, config.vocab_size, (batch, seq), generator=gen)
    masked = torch.rand(batch, seq, generator=gen) < 0.15
    masked[:, 0] = True
    labels = torch.where(masked, ids, torch.full_like(ids, -100)).to(device)
    inputs = torch.where(masked, torch.full_like(ids, 103), ids).to(device)

    def step() -> None:
        with torch.autocast(device.type, dtype=half, enabled=half is not None):
            loss = model(input_ids=inputs, labels=labels).loss
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(3):
        step()
    sync()
    start = time.perf_counter()
    step()
    sync()
    steps = max(5, int(seconds / max(time.perf_counter() - start, 1e-6)))
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return batch * steps / (time.perf_counter() - start)


def harness(bench: Benchmark, device_info: DeviceInfo, params: dict[str, Any],
            policy: TimingPolicy) -> float:
    from accelbench.core.case import Case
    from accelbench.runner.plan import PlannedCase

    case = Case.make(bench.name, bench.version, bench.family, params, device_info.torch_device)
    return measured(PlannedCase(bench, case, params), device_info, policy, "throughput")[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default=None, help="default: fp32 on CPU, bf16 on GPU")
    parser.add_argument("--batch", type=int, default=None, help="default: 8 on CPU, 64 on GPU")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0, help="per method per round")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads for torch (default: torch's choice)")
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    from accelbench.benchmarks import REGISTRY
    from accelbench.core.timing import TimingPolicy
    from accelbench.env.fingerprint import collect

    device_info = collect(args.device).device
    gpu = device_info.type != "cpu"
    dtype = args.dtype or ("bf16" if gpu else "fp32")
    batch = args.batch or (64 if gpu else 8)
    bench = REGISTRY.get("train")
    config = ",".join(f"{k}={v}" for k, v in SHAPE.items())
    params = bench.resolve({"model": "bert-base", "config": config, "dtype": dtype,
                            "batch": batch, "seq": args.seq})
    policy = TimingPolicy(max_time=args.seconds, warmup_time=0.2)
    device = torch.device(device_info.torch_device)

    print(f"bert-base with {config}, batch {batch}, seq {args.seq}, {dtype}, "
          f"on {device_info.name}; {args.rounds} rounds")
    print(f"{'round':>5} {'accelbench sample/s':>20} {'plain loop sample/s':>20} {'ratio':>7}")
    ours, plain = alternate(
        args.rounds,
        lambda: harness(bench, device_info, params, policy),
        lambda: plain_loop(device, dtype, batch, args.seq, args.seconds),
    )
    return verdict(ours, plain, TARGET)


if __name__ == "__main__":
    sys.exit(main())
