"""Does the harness cost the collectives anything?

Measures all-reduce bus bandwidth two ways in the same torchrun job, at the same sizes,
alternating rounds so that drift hits both alike: accelbench's collectives benchmark (the
whole case path every rank runs: correctness check, coordinated adaptive timing) and a
plain timed loop of torch.distributed.all_reduce, sized to the same time, whose time per
call is the slowest rank's. Prints the ratio accelbench / plain per size (median over
rounds; target at least 0.95) and the spread of each method across rounds.

    python bench/collectives_overhead.py [--nproc 2] [--sizes 4K:16M:x16] [--rounds 5]

It starts its own ranks with torchrun (gloo on the CPU, nccl — RCCL on ROCm — on GPUs),
or joins a job it is already part of: `torchrun --nproc-per-node 8 bench/...py`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 0.95


def plain_busbw(torch, dist, device, size: int, world: int, seconds: float) -> float:
    """A hand-written loop: one buffer, calls back to back, one sync at the end."""
    buf = torch.ones(size // 4, dtype=torch.float32, device=device)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(5):
        dist.all_reduce(buf)
    sync()
    start = time.perf_counter()
    dist.all_reduce(buf)
    sync()
    calls = torch.tensor([max(5, int(seconds / max(time.perf_counter() - start, 1e-7)))],
                         device=device)
    dist.broadcast(calls, src=0)  # every rank runs as many calls as rank 0 chose
    dist.barrier()
    start = time.perf_counter()
    for _ in range(int(calls.item())):
        dist.all_reduce(buf)
    sync()
    elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64, device=device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    per_call = float(elapsed.item()) / int(calls.item())
    return size * 2 * (world - 1) / world / per_call


def harness_busbw(planned, device_info, policy, info, coordinator) -> float:
    from accelbench.runner.worker import execute_case

    measurement = execute_case(planned, device_info, policy, info, coordinator)
    if not measurement.ok:
        raise SystemExit(f"accelbench's collectives case failed: {measurement.reason}")
    return measurement.figure("busbw").value


def as_rank(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    from accelbench.benchmarks import REGISTRY
    from accelbench.benchmarks.collectives.sweep import parse_sizes
    from accelbench.core.case import Case
    from accelbench.core.timing import TimingPolicy
    from accelbench.env.device import DeviceInfo
    from accelbench.report.units import format_size
    from accelbench.runner.distributed import GroupCoordinator, init_group, shutdown_group
    from accelbench.runner.plan import PlannedCase

    gpu = torch.cuda.is_available()
    backend = "nccl" if gpu else "gloo"
    info = init_group(backend, "cuda" if gpu else "cpu", 600.0)
    if gpu:
        platform = "rocm" if torch.version.hip else "cuda"
        device_info = DeviceInfo("cuda", info.local_rank, platform,
                                 torch.cuda.get_device_name(info.local_rank))
    else:
        device_info = DeviceInfo("cpu", None, "cpu", "cpu")
    device = torch.device(device_info.torch_device)
    coordinator = GroupCoordinator(device_info.torch_device if gpu else "cpu")
    bench = REGISTRY.get("collectives")
    policy = TimingPolicy(max_time=args.seconds, warmup_time=0.1)
    sizes = parse_sizes(args.sizes or ("1M:1G:x16" if gpu else "4K:16M:x16"))
    world = info.world_size
    say = print if info.rank == 0 else (lambda *a, **k: None)

    say(f"all-reduce fp32, {world} ranks, {backend}, {args.rounds} rounds of "
        f"{args.seconds:g} s per method")
    say(f"{'size':>6} {'accelbench GB/s':>16} {'plain loop GB/s':>16} {'ratio':>7} "
        f"{'spread ours':>12} {'spread plain':>13}")
    worst = float("inf")
    for size in sizes:
        params = bench.resolve({"op": "all-reduce", "bytes": size})
        identity = {**params, "world_size": world, "backend": backend}
        case = Case.make(bench.name, bench.version, bench.family, identity,
                         device_info.torch_device)
        planned = PlannedCase(bench, case, params)
        ours, plain = [], []
        for i in range(args.rounds):
            # Alternate which goes first, so warm-up and drift favour neither.
            if i % 2 == 0:
                ours.append(harness_busbw(planned, device_info, policy, info, coordinator))
                plain.append(plain_busbw(torch, dist, device, size, world, args.seconds))
            else:
                plain.append(plain_busbw(torch, dist, device, size, world, args.seconds))
                ours.append(harness_busbw(planned, device_info, policy, info, coordinator))
        ratio = statistics.median(a / p for a, p in zip(ours, plain, strict=True))
        worst = min(worst, ratio)

        def spread(xs: list[float]) -> float:
            return statistics.stdev(xs) / statistics.mean(xs) if len(xs) > 1 else 0.0

        say(f"{format_size(size):>6} {statistics.median(ours) / 1e9:>16.3f} "
            f"{statistics.median(plain) / 1e9:>16.3f} {ratio:>7.3f} {spread(ours):>12.1%} "
            f"{spread(plain):>13.1%}")
    say(f"lowest median ratio accelbench/plain: {worst:.3f} (target >= {TARGET})")
    if info.rank == 0 and args.verdict:
        Path(args.verdict).write_text("ok" if worst >= TARGET else "below target")
    shutdown_group()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nproc", type=int, default=2, help="ranks to start (default 2)")
    parser.add_argument("--sizes", help="a size sweep, default 4K:16M:x16 (CPU), 1M:1G:x16 (GPU)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.5, help="per method per round")
    parser.add_argument("--verdict", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if "RANK" in os.environ:
        as_rank(args)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        verdict = Path(tmp) / "verdict"
        code = subprocess.call([sys.executable, "-m", "torch.distributed.run", "--standalone",
                                f"--nproc-per-node={args.nproc}", __file__, *sys.argv[1:],
                                "--verdict", str(verdict)])
        if code != 0:
            return code
        return 0 if verdict.read_text() == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
