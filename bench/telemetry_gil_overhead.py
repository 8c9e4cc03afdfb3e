"""What does telemetry sampling cost the microsecond cases it runs beside, read from a
thread of the measuring process or from a process of its own (what the runner's workers
do: env.telemetry.remote)?

A sampler thread in the process that measures the case holds the GIL, every 50 ms, for as
long as a reading's Python-side work lasts, time the timed loop cannot run; a child
process takes no GIL from it, only its share of the CPUs. Cases whose calls take
microseconds are the most exposed: this script measures two on the CPU, accelbench's eager
launch case (one add on a one-element tensor: PyTorch's dispatch, the CPU-side part of a
launch) and a 16x16 fp32 GEMM, each under five arms:

- off: nothing sampled;
- thread host: accelbench's `TelemetrySampler`, every 50 ms, over the host source
  (`HostSource`: RAPL where readable, clocks, load and steal from /proc and /sys), what a
  CPU case samples;
- thread host+gpu: the same plus a stand-in for a vendor source (NVML or amdsmi), whose
  every reading makes `--gpu-calls` calls, each holding the GIL for its share of
  `--gpu-hold-ms` (the binding's Python work: wrapping arguments, checking errors,
  building the result) and then letting it go for its share of `--gpu-driver-ms` (the
  driver call itself, which ctypes makes with the GIL released);
- child host: accelbench's `RemoteSampler`, what the worker uses: the host source read
  every 50 ms by `python -m accelbench.env.telemetry.remote`, started and ready before the
  case;
- child host+gpu: the host and the stand-in read at the same pace from a process of their
  own (multiprocessing, spawn), started and ready before the case.

Each case is measured by accelbench's worker path (`execute_case`, sampling for the full
`--seconds` so that every run covers as many readings), the sampler started before it and
stopped after it as the worker does. The arms are interleaved within each round, their
order rotated from round to round, so that the machine's drift hits all alike. Every run's
figures are printed: accelbench's figure (the median over samples of 10 ms of calls), the
mean time per call (total time over calls, which a reading's stall reaches in full) and
the readings taken; then, per case and arm, the ratio on / off of each, its median across
rounds with a distribution-free 95% interval, the ratio thread / child of the figure, and
each arm's spread. `--busy N` keeps N other processes spinning a core each for the run.

    python bench/telemetry_gil_overhead.py [--rounds 9] [--seconds 1] [--busy 0]
        [--gpu-calls 8] [--gpu-hold-ms 0.5] [--gpu-driver-ms 1.0]

bench/telemetry_latency_overhead.py measures the launch case with the sources the worker
really opens (`--device cuda` for a real vendor source). Exits 0 when no cost above 1% is
resolved under the child arms (how accelbench samples): the 95% interval of the median
ratio on / off of the launch case's figure, and of its mean time per call, reaches down to
1.01 or below; 1 when one lies wholly above it; a miss on a busy host (a load
average above the CPU count at the start or the end, where the rounds spread far more than
1%) is inconclusive, exit 2."""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from _rounds import measured, spinning

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.synchronize import Event

    from accelbench.core.device import DeviceInfo
    from accelbench.core.timing import TimingPolicy
    from accelbench.runner.plan import PlannedCase

GOAL = 1.01
EXIT_INCONCLUSIVE = 2
INTERVAL_S = 0.05
READY_TIMEOUT_S = 120.0
CASES = (("launch", {"mode": "eager"}, "latency"),
         ("gemm", {"shape": "16", "dtype": "fp32"}, "time"))


@dataclass(frozen=True)
class Arm:
    """Where the readings are taken ("" for none, "thread", "child") and of what."""

    where: str
    gpu: bool = False

    @property
    def label(self) -> str:
        return f"{self.where} {'host+gpu' if self.gpu else 'host'}" if self.where else "off"


ARMS = (Arm(""), Arm("thread"), Arm("thread", gpu=True), Arm("child"), Arm("child", gpu=True))


@dataclass(frozen=True)
class GpuCost:
    """What one reading of the stand-in vendor source costs."""

    calls: int
    hold_s: float
    driver_s: float


class HeldGilSource:
    """A vendor source's cost without the vendor: `calls` calls per reading, each holding
    the GIL for its share of `hold_s` (a busy loop of Python) and then releasing it for its
    share of `driver_s` (a sleep, as ctypes releases it around the driver call)."""

    name = "held-gil"

    def __init__(self, cost: GpuCost) -> None:
        self._calls = max(1, cost.calls)
        self._hold_s = cost.hold_s / self._calls
        self._driver_s = cost.driver_s / self._calls

    def read(self) -> dict[str, float | None]:
        for _ in range(self._calls):
            until = time.perf_counter() + self._hold_s
            while time.perf_counter() < until:
                pass
            if self._driver_s > 0:
                time.sleep(self._driver_s)
        return {"power_w": 100.0}

    def close(self) -> None:
        """Nothing is held open."""


def sources(gpu: GpuCost | None) -> tuple[list[Any], dict[str, str]]:
    """The host source, and the stand-in where asked; why RAPL is missing, if it is."""
    from accelbench.env.telemetry.host import HostSource

    host = HostSource()
    return [host] if gpu is None else [host, HeldGilSource(gpu)], host.missing


def sample_in_child(stop: Event, conn: Connection, interval_s: float,
                    gpu: GpuCost | None) -> None:
    """The child arm's process: the first reading, "ready", then a reading every
    `interval_s`, paced as the sampler's thread paces them, until `stop`; then the
    number of readings taken."""
    found, _ = sources(gpu)
    for source in found:
        source.read()
    conn.send("ready")
    readings = 1
    next_at = time.perf_counter() + interval_s
    while not stop.wait(max(0.0, next_at - time.perf_counter())):
        for source in found:
            source.read()
        readings += 1
        next_at = max(next_at + interval_s, time.perf_counter())
    conn.send(readings)


@contextlib.contextmanager
def sampling(arm: Arm, gpu: GpuCost) -> Iterator[list[int]]:
    """Readings under `arm` for as long as the block runs; yields a list that holds the
    number of readings taken once the block is done."""
    taken: list[int] = []
    stand_in = gpu if arm.gpu else None
    if arm.where == "thread":
        from accelbench.env.telemetry import TelemetrySampler

        found, missing = sources(stand_in)
        sampler = TelemetrySampler(found, missing, INTERVAL_S).start()
        try:
            yield taken
        finally:
            taken.append(len(sampler.stop().t))
    elif arm.where == "child" and stand_in is None:
        from accelbench.env.telemetry.remote import RemoteSampler

        remote = RemoteSampler("cpu", None, INTERVAL_S).start()
        try:
            yield taken
        finally:
            taken.append(len(remote.stop().t))
    elif arm.where == "child":
        spawn = multiprocessing.get_context("spawn")
        stop = spawn.Event()
        ours, theirs = spawn.Pipe(duplex=False)
        child = spawn.Process(target=sample_in_child, daemon=True,
                              args=(stop, theirs, INTERVAL_S, stand_in))
        child.start()
        theirs.close()
        try:
            if not ours.poll(READY_TIMEOUT_S) or _received(ours) != "ready":
                raise SystemExit(f"the sampling child did not start (exit code "
                                 f"{child.exitcode})")
            yield taken
        finally:
            stop.set()
            readings = _received(ours) if ours.poll(READY_TIMEOUT_S) else None
            taken.append(readings if isinstance(readings, int) else 0)
            child.join(READY_TIMEOUT_S)
    else:
        yield taken
        taken.append(0)


def _received(conn: Connection) -> object:
    """What the child sent, or None where it ended first."""
    try:
        return conn.recv()
    except EOFError:
        return None


def run_once(planned: PlannedCase, device: DeviceInfo, policy: TimingPolicy, figure: str,
             arm: Arm, gpu: GpuCost) -> tuple[float, float, int]:
    """(accelbench's figure in s, mean time per call in s, readings) of one run."""
    with sampling(arm, gpu) as taken:
        value, m = measured(planned, device, policy, figure)
    assert m.stats is not None
    return value, m.stats.mean, taken[0]


def read_cost(source: Any, reads: int) -> tuple[float, float]:
    """(wall, CPU) seconds one read() of the source takes here, on its own thread; the
    CPU time is what a reading holds the GIL for at most, however busy the host."""
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(reads):
        source.read()
    return ((time.perf_counter() - wall) / reads, (time.thread_time() - cpu) / reads)


def interval(name: str, values: list[float]) -> tuple[float, float]:
    """Print the median of `values` across rounds with its 95% interval; return the
    median and the interval's low end."""
    from accelbench.core.stats import median_ci

    middle = statistics.median(values)
    low, high, exact = median_ci(values)
    note = "" if exact else " (too few rounds: their range)"
    print(f"  {name:<26} median {middle:.3f}, 95% interval [{low:.3f}, {high:.3f}]{note}; "
          f"each: {' '.join(f'{v:.3f}' for v in values)}")
    return middle, low


def ratios(on: list[float], off: list[float]) -> list[float]:
    return [a / b for a, b in zip(on, off, strict=True)]


def spread(xs: list[float]) -> float:
    return statistics.stdev(xs) / statistics.mean(xs) if len(xs) > 1 else 0.0


def planned_cases(device: DeviceInfo) -> list[tuple[str, PlannedCase, str]]:
    """(label, case, figure) of each case measured."""
    from accelbench.benchmarks import REGISTRY
    from accelbench.core.case import Case
    from accelbench.runner.plan import PlannedCase

    found = []
    for name, raw, figure in CASES:
        bench = REGISTRY.get(name)
        params = bench.resolve(raw)
        case = Case.make(bench.name, bench.version, bench.family, params, device.torch_device)
        label = f"{name} {' '.join(f'{k}={v}' for k, v in raw.items())}"
        found.append((label, PlannedCase(bench, case, params), figure))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seconds", type=float, default=1.0, help="sampling time per run")
    parser.add_argument("--busy", type=int, default=0,
                        help="processes spinning a core each beside the whole run")
    parser.add_argument("--gpu-calls", type=int, default=8,
                        help="vendor calls per reading (NvmlSource makes 8)")
    parser.add_argument("--gpu-hold-ms", type=float, default=0.5,
                        help="GIL held per reading, over all its calls (ms)")
    parser.add_argument("--gpu-driver-ms", type=float, default=1.0,
                        help="GIL released per reading, in the driver (ms)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")

    from accelbench.core.timing import TimingPolicy
    from accelbench.env.fingerprint import collect
    from accelbench.env.telemetry.host import HostSource

    gpu = GpuCost(args.gpu_calls, args.gpu_hold_ms * 1e-3, args.gpu_driver_ms * 1e-3)
    device = collect("cpu").device
    # The full --seconds every run (a CI target it cannot reach), no host sampler beside.
    policy = TimingPolicy(max_time=args.seconds, warmup_time=0.1, host_interval=0,
                          telemetry_interval=0, target_rel_ci=1e-9, max_samples=100_000)
    cases = planned_cases(device)
    cpus = os.cpu_count() or 1
    loads = [os.getloadavg()[0]]
    host = HostSource()
    host_wall, host_cpu = read_cost(host, 200)
    gpu_wall, gpu_cpu = read_cost(HeldGilSource(gpu), 50)
    print(f"{device.name}, {cpus} CPUs, load average {loads[0]:.2f} at the start, "
          f"{args.busy} spinning processes beside; {args.rounds} rounds of {args.seconds:g} s "
          f"per run; readings every {INTERVAL_S * 1e3:g} ms")
    print(f"one reading (wall / CPU): host {host_wall * 1e6:.0f} / {host_cpu * 1e6:.0f} us "
          f"({'; '.join(host.missing.values()) or 'RAPL read'}); stand-in vendor source "
          f"{gpu_wall * 1e3:.2f} / {gpu_cpu * 1e3:.2f} ms ({gpu.calls} calls, "
          f"{args.gpu_hold_ms:g} ms holding the GIL, {args.gpu_driver_ms:g} ms in sleeps)")

    # figures[case][arm] -> (accelbench's figures, mean times per call)
    figures: dict[str, dict[Arm, tuple[list[float], list[float]]]] = {
        label: {arm: ([], []) for arm in ARMS} for label, _, _ in cases}
    busy = spinning(args.busy) if args.busy else contextlib.nullcontext()
    with busy:
        print(f"{'round':>5} {'case':<26} {'arm':<16} {'figure (us)':>12} {'mean (us)':>10} "
              f"{'readings':>8}")
        for i in range(args.rounds):
            order = ARMS[i % len(ARMS):] + ARMS[:i % len(ARMS)]
            for label, planned, figure in cases:
                for arm in order:
                    value, mean, taken = run_once(planned, device, policy, figure, arm, gpu)
                    figures[label][arm][0].append(value)
                    figures[label][arm][1].append(mean)
                    print(f"{i + 1:>5} {label:<26} {arm.label:<16} {value * 1e6:>12.3f} "
                          f"{mean * 1e6:>10.3f} {taken:>8}")
    loads.append(os.getloadavg()[0])
    print(f"load average {loads[1]:.2f} at the end")

    worst = resolved = 0.0
    off = ARMS[0]
    for label, _, _ in cases:
        arms = figures[label]
        print(f"{label}: ratio on / off across rounds (figure, then mean per call)")
        for arm in ARMS[1:]:
            middle, low = interval(arm.label, ratios(arms[arm][0], arms[off][0]))
            mean, mean_low = interval(f"{arm.label} (mean)",
                                      ratios(arms[arm][1], arms[off][1]))
            if arm.where == "child" and label.startswith("launch"):
                worst = max(worst, middle, mean)
                resolved = max(resolved, low, mean_low)
        for gpu_too in (False, True):
            thread, child = Arm("thread", gpu_too), Arm("child", gpu_too)
            interval(f"thread / child, {'host+gpu' if gpu_too else 'host'}",
                     ratios(arms[thread][0], arms[child][0]))
        print("  spread across rounds (CV) of the figure: " + ", ".join(
            f"{arm.label} {spread(arms[arm][0]):.1%}" for arm in ARMS))
    print(f"launch, child arms (how accelbench samples): largest median ratio of the figure "
          f"or the mean {worst:.3f}; largest low end of its 95% interval {resolved:.3f} "
          f"(goal: no cost above {GOAL} resolved, that low end <= {GOAL})")
    if resolved <= GOAL:
        return 0
    if max(loads) > cpus:
        print(f"inconclusive: a load average above the {cpus} CPUs, where the rounds spread "
              f"far more than the goal; run it on an idle host")
        return EXIT_INCONCLUSIVE
    return 1


if __name__ == "__main__":
    sys.exit(main())
