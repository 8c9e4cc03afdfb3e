"""Does the harness add anything to what it measures?

Measures one GEMM two ways in the same process, alternating rounds so that drift of
the machine hits both alike: accelbench's gemm benchmark (adaptive timing, the full
in-process case path) and a plain timed loop of the same operation. Prints the ratio
accelbench / plain per round, its median (target: at least 0.97), and the spread of
each method across rounds.

    python bench/harness_overhead.py [--device auto] [--shape 1024] [--dtype fp32] [--rounds 7]
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


def plain_loop_flops(device: Any, m: int, n: int, k: int, dtype: str, seconds: float) -> float:
    """A hand-written loop: same operation, same output buffer, one sync at the end."""
    import torch

    from accelbench.core.dtypes import DTYPES

    torch_dtype = getattr(torch, DTYPES[dtype].torch_name)
    gen = torch.Generator(device="cpu").manual_seed(0)
    a = torch.randn(m, k, generator=gen).to(device=device, dtype=torch_dtype)
    b = torch.randn(k, n, generator=gen).to(device=device, dtype=torch_dtype)
    c = torch.empty(m, n, device=device, dtype=torch_dtype)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(3):
        torch.matmul(a, b, out=c)
    sync()
    # Size the loop to about `seconds`.
    start = time.perf_counter()
    torch.matmul(a, b, out=c)
    sync()
    iterations = max(3, int(seconds / max(time.perf_counter() - start, 1e-7)))
    start = time.perf_counter()
    for _ in range(iterations):
        torch.matmul(a, b, out=c)
    sync()
    return 2.0 * m * n * k * iterations / (time.perf_counter() - start)


def harness_flops(bench: Benchmark, device_info: DeviceInfo, params: dict[str, Any],
                  policy: TimingPolicy) -> float:
    from accelbench.core.case import Case
    from accelbench.runner.plan import PlannedCase

    case = Case.make(bench.name, bench.version, bench.family, params, device_info.torch_device)
    return measured(PlannedCase(bench, case, params), device_info, policy, "throughput")[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--shape", default=None, help="default: 1024 on CPU, 8192 on GPU")
    parser.add_argument("--dtype", default=None, help="default: fp32 on CPU, bf16 on GPU")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=1.0, help="per method per round")
    args = parser.parse_args()

    import torch

    from accelbench.benchmarks import REGISTRY
    from accelbench.benchmarks.micro.shapes import parse_shape
    from accelbench.core.timing import TimingPolicy
    from accelbench.env.fingerprint import collect

    device_info = collect(args.device).device
    gpu = device_info.type != "cpu"
    shape = args.shape or ("8192" if gpu else "1024")
    dtype = args.dtype or ("bf16" if gpu else "fp32")
    m, n, k = parse_shape(shape)
    bench = REGISTRY.get("gemm")
    params = bench.resolve({"shape": shape, "dtype": dtype})
    policy = TimingPolicy(max_time=args.seconds, warmup_time=0.1)
    device = torch.device(device_info.torch_device)

    print(f"gemm {shape} ({m}x{n}x{k}) {dtype} on {device_info.name}, {args.rounds} rounds")
    print(f"{'round':>5} {'accelbench GFLOP/s':>20} {'plain loop GFLOP/s':>20} {'ratio':>7}")
    ours, plain = alternate(
        args.rounds,
        lambda: harness_flops(bench, device_info, params, policy),
        lambda: plain_loop_flops(device, m, n, k, dtype, args.seconds),
        scale=1e9,
    )
    return verdict(ours, plain, TARGET)


if __name__ == "__main__":
    sys.exit(main())
