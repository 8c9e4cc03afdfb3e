"""Do accelbench's GPU headline figures agree with plain PyTorch, and with the device?

Reads a stored run of the quick suite (`accelbench run --suite quick`), measures the same
operations again with plain PyTorch on the same GPU (CUDA events around back-to-back
calls, the median over blocks), and prints each headline figure beside its reference,
their ratio and the range expected for the device (gpu_expectations.py):

- bf16 GEMM 8192³ (torch.matmul into an output buffer, B column-major as nn.Linear's
  weight, as accelbench lays it out), FLOP/s;
- device-to-device copy of 1 GiB (tensor.copy_; read and write both counted), B/s;
- pinned host-to-device copy of 256 MiB (tensor.copy_, non_blocking), B/s;
- eager launch latency (x.add_(1) on a one-element tensor), s per launch;
- CUDA/HIP graph replay latency (the same op captured in a graph), s per replay;

and then the device's energy counter against the integral of its power readings on a 2 s
and a 10 s window of bf16 GEMM load (gpu_energy.py; skipped by --no-energy).

    python bench/gpu_reference.py --store RESULTS.sqlite [--run latest] [--json FILE]

Exit codes: 0 every figure passes; 1 a figure is out of range, disagrees with the
reference or is missing; 2 the store or run cannot be used; 4 PyTorch sees no GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from gpu_energy import measure_energy
from gpu_expectations import (
    COPY_MIB,
    GEMM_N,
    H2D_MIB,
    accelbench_figures,
    judge,
    judge_energy,
    product_for,
    render,
    to_dict,
)

EXIT_FAILED, EXIT_INPUT, EXIT_NO_GPU = 1, 2, 4
MIB = 1 << 20
WARMUP_S = 0.2  # seconds of calls before timing: clocks ramp up, libraries pick kernels
BLOCK_S = 0.02  # each block of back-to-back calls lasts about this long
BLOCKS = 9


def per_call(torch: Any, fn: Callable[[], Any]) -> float:
    """Seconds per call: the median over BLOCKS blocks of back-to-back calls, each timed
    by CUDA (HIP) events on the current stream, after WARMUP_S of warm-up calls."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    began = time.perf_counter()
    calls = 0
    while calls < 3 or time.perf_counter() - began < WARMUP_S:
        fn()
        calls += 1
        if calls % 8 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    start.record()
    fn()
    end.record()
    end.synchronize()
    one = max(start.elapsed_time(end) / 1e3, 1e-7)
    number = max(1, min(100_000, math.ceil(BLOCK_S / one)))
    blocks = []
    for _ in range(BLOCKS):
        start.record()
        for _ in range(number):
            fn()
        end.record()
        end.synchronize()
        blocks.append(start.elapsed_time(end) / 1e3 / number)
    return float(statistics.median(blocks))


def gemm_flops(torch: Any, device: Any) -> float:
    # Uniform in [-1, 1) as accelbench's inputs (the data moves a power-capped GPU's clock).
    a = torch.rand(GEMM_N, GEMM_N, device=device, dtype=torch.bfloat16).mul_(2).sub_(1)
    weight = torch.rand(GEMM_N, GEMM_N, device=device, dtype=torch.bfloat16).mul_(2).sub_(1)
    b = weight.t()  # column-major, as accelbench's gemm (and nn.Linear) hands it to BLAS
    out = torch.empty(GEMM_N, GEMM_N, device=device, dtype=torch.bfloat16)
    return 2.0 * GEMM_N**3 / per_call(torch, lambda: torch.matmul(a, b, out=out))


def copy_bandwidth(torch: Any, device: Any) -> float:
    count = COPY_MIB * MIB // 4
    src = torch.ones(count, device=device, dtype=torch.float32)
    dst = torch.empty_like(src)
    return 2.0 * COPY_MIB * MIB / per_call(torch, lambda: dst.copy_(src))


def h2d_bandwidth(torch: Any, device: Any) -> float:
    count = H2D_MIB * MIB // 4
    host = torch.ones(count, dtype=torch.float32).pin_memory()
    dev = torch.empty(count, device=device, dtype=torch.float32)
    return float(H2D_MIB * MIB) / per_call(torch, lambda: dev.copy_(host, non_blocking=True))


def eager_latency(torch: Any, device: Any) -> float:
    x = torch.zeros(1, device=device, dtype=torch.int64)
    return per_call(torch, lambda: x.add_(1))


def graph_latency(torch: Any, device: Any) -> float:
    x = torch.zeros(1, device=device, dtype=torch.int64)
    side = torch.cuda.Stream()  # warm up on a side stream before capture, as documented
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            x.add_(1)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        x.add_(1)
    return per_call(torch, graph.replay)


REFERENCES: dict[str, Callable[[Any, Any], float]] = {
    "gemm_bf16": gemm_flops,
    "d2d_copy": copy_bandwidth,
    "h2d_pinned": h2d_bandwidth,
    "launch_eager": eager_latency,
    "launch_graph": graph_latency,
}


def measure_references(torch: Any, device: Any) -> tuple[dict[str, float | None], dict[str, str]]:
    """Every reference figure; one that fails is None, with the error as its note."""
    figures: dict[str, float | None] = {}
    notes: dict[str, str] = {}
    for key, measure in REFERENCES.items():
        try:
            figures[key] = measure(torch, device)
            torch.cuda.synchronize()
        except Exception as exc:  # one failing reference must not hide the others
            figures[key] = None
            first = (str(exc).splitlines() or [""])[0][:200]
            notes[key] = f"reference: {type(exc).__name__}: {first}"
        finally:
            with contextlib.suppress(Exception):
                torch.cuda.empty_cache()  # the buffers of one reference are gone before the next
    return figures, notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, help="the store the quick suite ran into")
    parser.add_argument("--run", default="latest", help="the run to check (default latest)")
    parser.add_argument("--json", metavar="FILE", help="also write the verdict as JSON")
    parser.add_argument("--no-energy", action="store_true",
                        help="skip the energy counter's check (about 20 s of load)")
    args = parser.parse_args(argv)

    from accelbench.core.device import DeviceInfo
    from accelbench.errors import UserError
    from accelbench.store import Store

    try:
        with Store.open(args.store, create=False) as store:
            stored = store.load_run(args.run)
    except UserError as exc:
        print(f"gpu_reference: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    device = DeviceInfo.from_dict(stored.fingerprint["device"])
    if device.type != "cuda":
        print(f"gpu_reference: error: run {stored.record.id} was measured on {device.name} "
              f"({device.torch_device}), not on a GPU", file=sys.stderr)
        return EXIT_INPUT

    import torch

    if not torch.cuda.is_available():
        print("gpu_reference: no GPU: torch.cuda.is_available() is False", file=sys.stderr)
        return EXIT_NO_GPU
    index = device.index or 0
    here = torch.cuda.get_device_name(index) if index < torch.cuda.device_count() else None
    if here != device.name:
        print(f"gpu_reference: error: run {stored.record.id} was measured on {device.name} "
              f"({device.torch_device}); here that device is {here or 'absent'}",
              file=sys.stderr)
        return EXIT_INPUT
    torch.cuda.set_device(index)
    plain, plain_notes = measure_references(torch, torch.device("cuda", index))
    ours, notes = accelbench_figures(stored.measurements)
    both = {key: "; ".join(n for n in (notes.get(key), plain_notes.get(key)) if n)
            for key in {*notes, *plain_notes}}
    judgement = judge(product_for(device), ours, plain, both)
    if not args.no_energy:
        windows, why_none = measure_energy(torch, index)
        judgement = dataclasses.replace(judgement, energy=judge_energy(windows, why_none))
    product = judgement.product or "no expected ranges"
    print(render(judgement, f"accelbench run {stored.record.id} on {device.name} "
                            f"({device.torch_device}; {product}) beside plain PyTorch "
                            f"{torch.__version__}"))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"run_id": stored.record.id, "device": device.to_dict(),
                       "torch": torch.__version__, **to_dict(judgement)}, out, indent=2)
    return 0 if judgement.ok else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
