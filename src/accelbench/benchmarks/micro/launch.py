"""Kernel launch latency: the cost of asking the device to do almost nothing.

The operation adds one to a one-element tensor, so the kernel itself is negligible and
back-to-back calls are paced by the launch path: in eager mode PyTorch's dispatcher
plus the driver's launch (on the CPU, the dispatcher alone); in graph mode the replay
of a captured CUDA graph (a hipGraph on ROCm), which skips the dispatcher.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseFailed, CaseResult, CaseSkipped
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark

if TYPE_CHECKING:
    import torch

MODES = ("eager", "graph")
CHECK_CALLS = 3


@dataclass(frozen=True)
class LaunchParams:
    """The parameters of a launch case (`BENCHMARK.params`)."""

    mode: str


def measure(ctx: CaseContext, params: LaunchParams) -> CaseResult:
    """Check that calls really run, then time them back to back; the time is the figure."""
    import torch

    mode = params.mode
    if mode == "graph" and ctx.device.type != "cuda":
        raise CaseSkipped("graph replay needs CUDA or HIP graphs")
    device = torch.device(ctx.device.torch_device)
    x = torch.zeros(1, device=device, dtype=torch.int64)

    fn: Callable[[], Any]
    if mode == "eager":
        fn = functools.partial(x.add_, 1)
    else:
        fn = _capture(torch, device, functools.partial(x.add_, 1))

    before = int(x.item())
    for _ in range(CHECK_CALLS):
        fn()
    after = int(x.item())
    if after - before != CHECK_CALLS:
        raise CaseFailed(
            f"wrong result: {CHECK_CALLS} calls added {after - before} instead of {CHECK_CALLS}"
        )

    timing = ctx.time(fn)
    return CaseResult(
        timing=timing,
        details={
            "mode": mode,
            "op": "x.add_(1) on a 1-element int64 tensor",
            "ops_per_call": 1,
            "timed": "graph.replay()" if mode == "graph" else "back-to-back eager calls",
        },
        time_name="latency",
    )


def _capture(torch: ModuleType, device: torch.device, op: Callable[[], Any]
             ) -> Callable[[], Any]:
    """Capture op in a CUDA graph (hipGraph on ROCm) and return its replay."""
    with torch.cuda.device(device):
        # Warm up on a side stream before capture, as the CUDA graphs documentation asks.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                op()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            op()
    return graph.replay


BENCHMARK = Benchmark(
    name="launch",
    family="micro",
    summary="Kernel launch latency of a trivial op, eager or replayed from a graph",
    entry="accelbench.benchmarks.micro.launch:measure",
    params=(
        Param(
            "mode",
            "str",
            "eager",
            help="eager calls, or replay of a captured CUDA/HIP graph",
            choices=MODES,
        ),
    ),
    devices=("cpu", "cuda"),
    timeout_s=120.0,
    views=("accelbench.benchmarks.micro.view:sections",),
    typed=LaunchParams,
)
