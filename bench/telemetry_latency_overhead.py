"""Does the telemetry thread inside the measuring process slow down launch latency?

The sampler reads its sources every 50 ms from a thread of the process that measures the
case. A launch-latency case is the one most exposed to it: each call takes microseconds,
and every tick of the thread takes the GIL from the timed loop for as long as its reads
last. This script measures accelbench's launch case (eager: one add on a one-element
tensor; on the CPU that is PyTorch's dispatch alone, the CPU-side part of a launch) in
one process, with the sampler on (`telemetry_interval` 0.05 s, the default) and off,
alternating rounds so that drift of the machine hits both alike. It prints the latency
of each, the ratio on / off per round and its median (goal: at most 1.02, i.e. the
thread adds under 2%), and the spread of each across rounds; the sources sampled are
those of the device's worker (the host alone on a CPU, NVML or amdsmi and the host on
a GPU).

    python bench/telemetry_latency_overhead.py [--device cpu] [--rounds 9] [--seconds 1]

Exits 0 when the goal is met and 1 when it is not.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from typing import TYPE_CHECKING, Any

from _rounds import alternate, measured

if TYPE_CHECKING:
    from accelbench.core.device import DeviceInfo
    from accelbench.core.registry import Benchmark
    from accelbench.core.timing import TimingPolicy

GOAL = 1.02
INTERVAL_S = 0.05


def latency(bench: Benchmark, device: DeviceInfo, params: dict[str, Any],
            policy: TimingPolicy, sources: list[str]) -> float:
    """accelbench's launch latency (s) under `policy`, as a run's worker measures it."""
    from accelbench.core.case import Case
    from accelbench.runner.plan import PlannedCase

    case = Case.make(bench.name, bench.version, bench.family, params, device.torch_device)
    value, m = measured(PlannedCase(bench, case, params), device, policy, "latency")
    if policy.telemetry_interval > 0 and m.series:
        for name in m.series[0].sources:
            if name not in sources:
                sources.append(name)
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seconds", type=float, default=1.0, help="per method per round")
    args = parser.parse_args()

    from accelbench.benchmarks import REGISTRY
    from accelbench.core.timing import TimingPolicy
    from accelbench.env.fingerprint import collect

    device = collect(args.device).device
    bench = REGISTRY.get("launch")
    params = bench.resolve({"mode": "eager"})
    base = TimingPolicy(max_time=args.seconds, warmup_time=0.1, host_interval=0)
    on = dataclasses.replace(base, telemetry_interval=INTERVAL_S)
    off = dataclasses.replace(base, telemetry_interval=0)
    sources: list[str] = []

    print(f"launch (eager) on {device.name}, {args.rounds} rounds, telemetry every "
          f"{INTERVAL_S:g} s against none")
    print(f"{'round':>5} {'telemetry on (us)':>20} {'off (us)':>20} {'ratio':>7}")
    with_thread, without = alternate(
        args.rounds,
        lambda: latency(bench, device, params, on, sources),
        lambda: latency(bench, device, params, off, sources),
        scale=1e-6,
    )
    print(f"sources sampled with telemetry on: {', '.join(sources) or 'none'}")

    def spread(xs: list[float]) -> float:
        return statistics.stdev(xs) / statistics.mean(xs) if len(xs) > 1 else 0.0

    ratio = statistics.median(a / b for a, b in zip(with_thread, without, strict=True))
    print(f"median latency: on {statistics.median(with_thread) * 1e6:.3f} us, "
          f"off {statistics.median(without) * 1e6:.3f} us")
    print(f"median ratio on/off: {ratio:.3f} (goal <= {GOAL})")
    print(f"spread across rounds (CV): on {spread(with_thread):.1%}, off {spread(without):.1%}")
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
