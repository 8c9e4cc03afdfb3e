"""Does a CPU memory copy's bandwidth depend on where its pages land, and do huge pages
(the `memory` benchmark's CPU buffers, `benchmarks/micro/host_pages.py`) take that away?

Two checks, each with the buffers on 4 KiB pages (`torch.empty`) and on huge pages:

- `sets`: in one process, `--sets` sets of buffers of `--size-mib`, each timed in turn for
  50 ms, `--passes` times round; prints every set's bandwidth and, per way, how far the
  sets lie apart (sd of ln bandwidth; max / min). One process, so the host's speed
  touches every set alike: what differs is where each set's pages are.
- `pairs`: pairs of fresh processes of this interpreter, one thread each, pinned to the
  same CPU, taking turns every 50 ms with set-up in turn as `accelbench ab` pairs them
  (the first allocates first); the two ways alternate pair by pair. Prints every pair's
  ln(second / first) of the median call time and, per way, its sd, the median |ln ratio|
  and the mean ln ratio by which process allocated first.

    python bench/memory_pages.py sets
    python bench/memory_pages.py pairs --pairs 12
    python bench/memory_pages.py pairs --op triad
"""

from __future__ import annotations

import argparse
import functools
import math
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

SLICE_S = 0.05
MIB = 1 << 20
WAYS = ("4k", "huge")


def _buffers(op: str, size_mib: int, way: str) -> Callable[[], object]:
    """One set of the op's buffers, written once; the call that times it."""
    import torch

    from accelbench.benchmarks.micro import host_pages, memory

    count = size_mib * MIB // memory.ELEMENT_BYTES

    def empty() -> torch.Tensor:
        if way == "huge":
            return host_pages.huge_page_tensor(count, torch.float32)
        return torch.empty(count)

    def filled() -> torch.Tensor:
        return torch.rand(count, out=empty())

    call: Callable[[], object]
    if op == "copy":
        src, dst = filled(), empty()
        call = functools.partial(dst.copy_, src)
    else:
        b, c, a = filled(), filled(), empty()
        call = functools.partial(torch.add, b, c, alpha=memory.TRIAD_SCALAR, out=a)
    call()
    return call


def _bandwidth(op: str, size_mib: int, seconds: float) -> float:
    from accelbench.benchmarks.micro import memory

    return memory.BUFFERS[op] * size_mib * MIB / seconds / 1e9


def sets_check(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(1)
    os.sched_setaffinity(0, {args.cpu})
    for way in WAYS:
        calls = [_buffers(args.op, args.size_mib, way) for _ in range(args.sets)]
        samples: list[list[float]] = [[] for _ in calls]
        for _ in range(args.passes):
            for call, times in zip(calls, samples, strict=True):
                held = time.perf_counter()
                while time.perf_counter() - held < SLICE_S:
                    start = time.perf_counter()
                    call()
                    times.append(time.perf_counter() - start)
        rates = [_bandwidth(args.op, args.size_mib, statistics.median(t)) for t in samples]
        logs = [math.log(rate) for rate in rates]
        print(f"{way:>4} pages: " + " ".join(f"{rate:5.1f}" for rate in rates) + " GB/s; "
              f"sd of ln {statistics.stdev(logs):.1%}, max/min {max(rates) / min(rates):.2f}",
              flush=True)
        del calls


def _side(op: str, size_mib: int, way: str, turns: int, cpu: int, mine: Any, theirs: Any,
          first: bool, out: Any) -> None:
    import torch

    torch.set_num_threads(1)
    os.sched_setaffinity(0, {cpu})
    if not first:
        mine.acquire()
    call = _buffers(op, size_mib, way)  # set up in turn: the first allocates first
    theirs.release()
    mine.acquire()
    samples: list[float] = []
    for turn in range(turns):
        held = time.perf_counter()
        while time.perf_counter() - held < SLICE_S:
            start = time.perf_counter()
            call()
            samples.append(time.perf_counter() - start)
        theirs.release()
        if turn < turns - 1:
            mine.acquire()
    out.put(statistics.median(samples))


def pair(op: str, size_mib: int, way: str, seconds: float, cpu: int) -> float:
    """ln(second's median call time / first's) of one pair taking turns."""
    ctx = multiprocessing.get_context("spawn")
    turns = max(2, round(seconds / SLICE_S))
    first_turn, second_turn = ctx.Semaphore(0), ctx.Semaphore(0)
    outs = ctx.Queue(), ctx.Queue()
    procs = [
        ctx.Process(target=_side, args=(op, size_mib, way, turns, cpu, first_turn,
                                        second_turn, True, outs[0])),
        ctx.Process(target=_side, args=(op, size_mib, way, turns, cpu, second_turn,
                                        first_turn, False, outs[1])),
    ]
    for proc in procs:
        proc.start()
    first, second = outs[0].get(), outs[1].get()
    for proc in procs:
        proc.join()
    return math.log(second / first)


def pairs_check(args: argparse.Namespace) -> None:
    logs: dict[str, list[float]] = {way: [] for way in WAYS}
    for number in range(args.pairs):
        for way in WAYS:
            logs[way].append(pair(args.op, args.size_mib, way, args.seconds, args.cpu))
            print(f"pair {number + 1:2d}  {way:>4} pages  ln(second/first) {logs[way][-1]:+.3f}",
                  flush=True)
    for way, values in logs.items():
        spread = statistics.stdev(values) if len(values) > 1 else float("nan")
        typical = statistics.median(abs(value) for value in values)
        print(f"{args.op} {args.size_mib} MiB on {way} pages: {len(values)} pairs, sd of ln "
              f"ratio {spread:.1%}, median |ln ratio| {typical:.1%}, mean ln ratio "
              f"{statistics.fmean(values):+.1%} (the second to allocate against the first)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("check", choices=("sets", "pairs"))
    parser.add_argument("--op", choices=("copy", "triad"), default="copy")
    parser.add_argument("--size-mib", type=int, default=64)
    parser.add_argument("--sets", type=int, default=10, help="buffer sets (sets)")
    parser.add_argument("--passes", type=int, default=6, help="rounds over the sets (sets)")
    parser.add_argument("--pairs", type=int, default=12, help="pairs per way (pairs)")
    parser.add_argument("--seconds", type=float, default=3.0, help="each pair's turns")
    parser.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    args = parser.parse_args(argv)
    if args.check == "sets":
        sets_check(args)
    else:
        pairs_check(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
