"""`isolate` on every rank of a job: each rank's node, then every pair, round by round,
in passes until the naming holds still.

Each rank says which node it runs on (`runner.nodes.node_name`); every rank then works
out the same rounds of disjoint pairs (`schedule`) and makes each round's pair groups
once, in the same order (`new_subgroups_by_enumeration`, which every rank of the job
must enter). A pass goes through the rounds; in each, the two ranks of each pair, within
their group:
1. check, on known data (small integers, exact in float32): a send/recv both ways at
   once, a ping-pong, an all-reduce; every wrong element is counted;
2. time `samples` samples of each: the ping-pong of `latency_bytes` (one-way latency is
   half the round trip), the send/recv of `bytes` both ways at once (bandwidth = bytes /
   time, nccl-tests' sendrecv), the all-reduce of `bytes` (bus bandwidth with
   nccl-tests' factor for 2 ranks).
Ranks outside every pair of a round wait for the round to end. At the end of a pass
every rank has every pair's samples: each sample is the slower rank's, and any wrong
element fails the case. Each pass is judged (`verdict.judge`), and passes are made until
`settle` says stop (the calls per sample found in the first pass are kept). The verdict
on every pass pooled, with what each pass named, is stored in the case's details with
every raw sample.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.collectives.ops import bus_factor, library
from accelbench.benchmarks.isolate.schedule import NODE, Layout, Pair, plan_rounds
from accelbench.benchmarks.isolate.settle import Settling, repeat, settle
from accelbench.benchmarks.isolate.verdict import PairFigures, judge, pair_figures
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseFailed, CaseResult, CaseSkipped, Figure
from accelbench.core.timing import Clock

if TYPE_CHECKING:
    from types import ModuleType

    import torch
    from torch import Tensor

NEEDS_RANKS = "needs at least 2 ranks; run with --nproc-per-node 2 or under torchrun"
FIGURES = ("latency_s", "p2p_s", "allreduce_s")
MAX_CALLS = 10_000  # calls per sample when sized by time
ELEMENT_BYTES = 4  # float32


@dataclass(frozen=True)
class IsolateParams:
    """The parameters of an isolate case (`declaration.BENCHMARK.params`)."""

    bytes: int
    latency_bytes: int
    samples: int
    iters: int
    warmup: int
    serial: bool
    agree: int
    max_passes: int
    budget: float
    min_busbw: float


def measure(ctx: CaseContext, params: IsolateParams) -> CaseResult:
    info = ctx.dist
    if info is None or info.world_size < 2:
        raise CaseSkipped(NEEDS_RANKS)
    import torch
    import torch.distributed as dist

    from accelbench.runner.nodes import node_name

    world, rank = info.world_size, info.rank
    names: list[Any] = [None] * world
    dist.all_gather_object(names, node_name())
    layout = Layout.from_names([str(n) for n in names])
    rounds = plan_rounds(layout, params.serial)
    ordered = [pair for pairs in rounds for pair in pairs]
    device = torch.device(ctx.device.torch_device)
    settling = Settling(params.agree, params.max_passes, params.budget)
    nbytes = _count(params.bytes) * ELEMENT_BYTES
    factor = bus_factor("all-reduce", 2) or 1.0
    min_busbw = params.min_busbw
    # Each round's pair groups, made once (every rank of the job enters each call) and
    # used by every pass.
    groups = [dist.new_subgroups_by_enumeration([list(p.ranks) for p in pairs])[1]
              for pairs in rounds]
    calls: dict[int, dict[str, int]] = {}  # pair index -> calls per sample, from pass 1
    samples: list[dict[str, list[float]]] = [{n: [] for n in FIGURES} for _ in ordered]
    by_pass: list[list[PairFigures]] = []
    everyone: list[Any] = [None] * world
    began = ctx.clock.now()

    def one_pass() -> tuple[list[str], float]:
        own = _one_pass(torch, dist, rounds, groups, rank, params, ctx, device, calls)
        dist.all_gather_object(everyone, {"pairs": own, "elapsed": ctx.clock.now() - began})
        figures = _pass_figures(ordered, everyone, samples, nbytes, factor)
        by_pass.append(figures)
        # Rank 0's clock for every rank, so that all make the same decision.
        return judge(figures, min_busbw).names(), float(everyone[0]["elapsed"])

    try:
        named, stopped = repeat(one_pass, settling)
    finally:
        for round_groups in groups:
            for group in round_groups:
                dist.destroy_process_group(group)  # a rank outside it has nothing to end

    pooled = [pair_figures(pair, s["latency_s"], s["p2p_s"], s["allreduce_s"], nbytes, factor)
              for pair, s in zip(ordered, samples, strict=True)]
    verdict = judge(pooled, min_busbw, by_pass)
    verdict = replace(verdict, settled=settle(named, verdict.names(), stopped, settling.agree,
                                              verdict.blind()))
    stored = [{**pair.to_dict(), "round": _round_of(rounds, index), **samples[index],
               "calls": _agreed_calls(everyone, ordered, index),
               "figures": dict(pooled[index].figures),
               "figures_by_pass": [dict(figures[index].figures) for figures in by_pass]}
              for index, pair in enumerate(ordered)]
    details: dict[str, Any] = {
        "nodes": list(layout.nodes),
        "ranks_per_node": [len(r) for r in layout.ranks],
        "world_size": world,
        "backend": info.backend,
        "library": library(torch, info.backend),
        "bytes": nbytes,
        "latency_bytes": _count(params.latency_bytes) * ELEMENT_BYTES,
        "rounds": len(rounds),
        "passes": len(named),
        "serial": params.serial,
        "time_is": "slower rank of the pair per sample; latency is half the round trip",
        "pairs": stored,
        "verdict": verdict.to_dict(),
        "named": verdict.names() if verdict.conclusive else [],
        "conclusive": verdict.conclusive,
    }
    return CaseResult(None, figures=_headline(pooled), details=details)


def _one_pass(torch: ModuleType, dist: ModuleType, rounds: list[list[Pair]],
              groups: list[list[Any]], rank: int, params: IsolateParams, ctx: CaseContext,
              device: torch.device, calls: dict[int, dict[str, int]]) -> dict[int, Any]:
    """This rank's side of every pair it is in, round by round."""
    own: dict[int, dict[str, Any]] = {}
    first = 0
    for pairs, round_groups in zip(rounds, groups, strict=True):
        for k, (pair, group) in enumerate(zip(pairs, round_groups, strict=True)):
            if rank in pair.ranks:
                own[first + k] = _measure_pair(torch, dist, pair, group, rank, params,
                                               ctx.clock, device, ctx.policy.block_time,
                                               calls.get(first + k))
                calls[first + k] = own[first + k]["calls"]
        first += len(pairs)
        # The round ends for everyone: the next round's pairs never overlap this one's.
        dist.all_reduce(torch.zeros(1, device=device))
    return own


def _pass_figures(ordered: list[Pair], everyone: list[Any],
                  samples: list[dict[str, list[float]]], nbytes: int, factor: float
                  ) -> list[PairFigures]:
    """One pass's figures of every pair from what every rank measured (each sample the
    slower rank's), its samples added to `samples`; CaseFailed on any wrong element."""
    figures, wrong = [], []
    for index, pair in enumerate(ordered):
        a, b = (everyone[r]["pairs"][index] for r in pair.ranks)
        taken = {name: [max(x, y) for x, y in zip(a[name], b[name], strict=True)]
                 for name in FIGURES}
        if a["wrong"] or b["wrong"]:
            wrong.append(f"{pair.label} ({a['wrong'] + b['wrong']} wrong elements)")
        for name in FIGURES:
            samples[index][name] += taken[name]
        figures.append(pair_figures(pair, taken["latency_s"], taken["p2p_s"],
                                    taken["allreduce_s"], nbytes, factor))
    if wrong:
        raise CaseFailed(f"wrong result between {', '.join(wrong)}: the data sent was not "
                         "the data received")
    return figures


def _agreed_calls(everyone: list[Any], ordered: list[Pair], index: int) -> dict[str, int]:
    a, b = (everyone[r]["pairs"][index] for r in ordered[index].ranks)
    return {n: max(a["calls"][n], b["calls"][n]) for n in FIGURES}


def _count(nbytes: int) -> int:
    return max(1, nbytes // ELEMENT_BYTES)


def _round_of(rounds: list[list[Pair]], index: int) -> int:
    for r, pairs in enumerate(rounds):
        if index < len(pairs):
            return r
        index -= len(pairs)
    raise IndexError(index)


def _headline(figures: list[PairFigures]) -> tuple[Figure, ...]:
    """The slowest pair's figures: of the node pairs where there are any."""
    node = [f for f in figures if f.pair.kind == NODE] or figures
    return (
        Figure("slowest busbw", min(f.figures["busbw"] for f in node), "B/s"),
        Figure("slowest p2p_bw", min(f.figures["p2p_bw"] for f in node), "B/s"),
        Figure("highest latency", max(f.figures["latency"] for f in node), "s",
               higher_is_better=False),
    )


def _measure_pair(torch: ModuleType, dist: ModuleType, pair: Pair, group: Any, rank: int,
                  params: IsolateParams, clock: Clock, device: torch.device,
                  block_time: float, known: dict[str, int] | None = None) -> dict[str, Any]:
    """This rank's side of one pair: the count of wrong elements, then its samples, with
    the calls per sample `known` from an earlier pass, else sized by time now."""
    peer = pair.ranks[1] if rank == pair.ranks[0] else pair.ranks[0]
    count, small = _count(params.bytes), _count(params.latency_bytes)

    def pattern(seed: int, n: int) -> Tensor:
        values = (torch.arange(n, dtype=torch.int64) + seed) % 101 + 1
        return values.to(torch.float32).to(device)

    send, recv = pattern(37 * rank, count), torch.zeros(count, device=device)
    ping, pong = pattern(37 * rank + 11, small), torch.zeros(small, device=device)
    summed = torch.empty(count, device=device)
    ops = [dist.P2POp(dist.isend, send, peer, group), dist.P2POp(dist.irecv, recv, peer, group)]

    def exchange() -> None:
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    def ping_pong() -> None:
        if rank == pair.ranks[0]:
            dist.send(ping, peer, group=group)
            dist.recv(pong, peer, group=group)
        else:
            dist.recv(pong, peer, group=group)
            dist.send(ping, peer, group=group)

    def all_reduce() -> None:
        dist.all_reduce(summed, group=group)

    wrong = 0
    exchange()
    wrong += int((recv != pattern(37 * peer, count)).sum().item())
    ping_pong()
    wrong += int((pong != pattern(37 * peer + 11, small)).sum().item())
    summed.copy_(send)
    all_reduce()
    wrong += int((summed != send + pattern(37 * peer, count)).sum().item())

    out: dict[str, Any] = {"wrong": wrong, "calls": {}}
    for name, fn, scale in (("latency_s", ping_pong, 0.5), ("p2p_s", exchange, 1.0),
                            ("allreduce_s", all_reduce, 1.0)):
        for _ in range(params.warmup):
            fn()
        calls = (params.iters or (known or {}).get(name)
                 or _calls(torch, dist, fn, clock, group, device, block_time))
        out["calls"][name] = calls
        out[name] = [clock.time(fn, calls) / calls * scale for _ in range(params.samples)]
    return out


def _calls(torch: ModuleType, dist: ModuleType, fn: Callable[[], Any], clock: Clock,
           group: Any, device: torch.device, block_time: float) -> int:
    """Calls per sample to fill `block_time`, from one timed call; the pair agrees on the
    slower side's count, so both make the same calls."""
    once = torch.tensor([clock.time(fn, 1)], dtype=torch.float64, device=device)
    dist.all_reduce(once, op=dist.ReduceOp.MAX, group=group)
    seconds = float(once.item())
    return max(1, min(MAX_CALLS, math.ceil(block_time / seconds))) if seconds > 0 else MAX_CALLS
