"""The ten collective operations, their bus-bandwidth factors, and `measure`.

Everything that decides a collective's numbers lives in this one module (the operations,
the sizes they move, the correctness check and the timing), because a benchmark's
version is the hash of its entry module: a change to any of them must make new results
incomparable with old ones.

Sizes follow nccl-tests: `bytes` is the size S of the operation, and algbw = S / t,
busbw = algbw * factor, with the slowest rank's time t.

| op | S is | factor |
|---|---|---|
| all-reduce | the buffer on each rank | 2(n-1)/n |
| all-gather | the gathered output (each rank gives S/n) | (n-1)/n |
| reduce-scatter | the input (each rank keeps S/n) | (n-1)/n |
| all-to-all | each rank's send buffer (S/n to every rank) | (n-1)/n |
| gather | the gathered output on the root (each rank gives S/n) | (n-1)/n |
| scatter | the input on the root (each rank gets S/n) | (n-1)/n |
| broadcast, reduce | the buffer on each rank | 1 |
| send-recv | what each rank sends (and receives) | 1 |
| barrier | nothing: latency only | - |

S is rounded down to whole elements, and to a multiple of n elements where the data is
split among ranks. The root of rooted operations is rank 0. In send-recv every rank
sends to rank + n//2 and receives from rank - n//2 (mod n) at the same time: pairs
across the two halves of the job (with two nodes, every pair crosses the network; with
two ranks it is nccl-tests' sendrecv).

torch.distributed has both an out-of-place and an in-place form of all-gather and
reduce-scatter only: all-reduce, broadcast and reduce always work in place, and gather,
scatter, all-to-all and send-recv never do. `inplace=auto` takes the out-of-place form
where there are both (nccl-tests' first column) and the only form elsewhere.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.collectives.details import CollectiveDetails, Peers
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseFailed, CaseResult, CaseSkipped, Rate
from accelbench.core.timing import Clock, Timing, TimingPolicy

if TYPE_CHECKING:
    import torch
    from torch import Tensor

OPS = ("all-reduce", "all-gather", "reduce-scatter", "broadcast", "reduce", "gather",
       "scatter", "all-to-all", "send-recv", "barrier")
REDUCE_OPS = ("sum", "max", "min", "prod", "avg")
INPLACE_CHOICES = ("auto", "no", "yes")
REDUCING = ("all-reduce", "reduce-scatter", "reduce")
SPLIT = ("all-gather", "reduce-scatter", "all-to-all", "gather", "scatter")
ROOTED = ("broadcast", "reduce", "gather", "scatter")
ROOT = 0
# The forms torch.distributed offers, out-of-place first: (in_place, ...).
FORMS: dict[str, tuple[bool, ...]] = {
    "all-reduce": (True,), "broadcast": (True,), "reduce": (True,),
    "all-gather": (False, True), "reduce-scatter": (False, True),
    "gather": (False,), "scatter": (False,), "all-to-all": (False,), "send-recv": (False,),
    "barrier": (),
}
TORCH_CALLS = {
    "all-reduce": "all_reduce", "all-gather": "all_gather_single (all_gather_into_tensor)",
    "reduce-scatter": "reduce_scatter_single (reduce_scatter_tensor)",
    "broadcast": "broadcast", "reduce": "reduce", "gather": "gather", "scatter": "scatter",
    "all-to-all": "all_to_all_single", "send-recv": "batch_isend_irecv", "barrier": "barrier",
}
NEEDS_RANKS = "needs at least 2 ranks; run with --nproc-per-node 2 or under torchrun"


@dataclass(frozen=True)
class ElementType:
    name: str
    torch_name: str
    bytes: int
    exact_limit: int  # every integer from 0 to this is exactly representable
    floating: bool


ELEMENT_TYPES: dict[str, ElementType] = {
    e.name: e
    for e in (
        ElementType("fp32", "float32", 4, 1 << 24, True),
        ElementType("fp16", "float16", 2, 1 << 11, True),
        ElementType("bf16", "bfloat16", 2, 1 << 8, True),
        ElementType("fp64", "float64", 8, 1 << 53, True),
        ElementType("int32", "int32", 4, (1 << 31) - 1, False),
        ElementType("int64", "int64", 8, (1 << 63) - 1, False),
        ElementType("int8", "int8", 1, 127, False),
        ElementType("uint8", "uint8", 1, 255, False),
    )
}
DTYPE_NAMES = tuple(ELEMENT_TYPES)


# --- sizes and bandwidths (pure) -------------------------------------------------------


def bus_factor(op: str, world_size: int) -> float | None:
    """nccl-tests' busbw / algbw for op on world_size ranks; None for barrier."""
    n = world_size
    if op == "all-reduce":
        return 2.0 * (n - 1) / n
    if op in SPLIT:
        return (n - 1) / n
    if op in ("broadcast", "reduce", "send-recv"):
        return 1.0
    if op == "barrier":
        return None
    raise ValueError(f"unknown collective {op!r}")


def element_count(op: str, nbytes: int, element_bytes: int, world_size: int) -> int:
    """Elements in the operation's size S: whole elements, a multiple of n where split."""
    if op == "barrier":
        return 0
    count = nbytes // element_bytes
    return count - count % world_size if op in SPLIT else count


def bandwidths(op: str, size_bytes: int, seconds: float, world_size: int) -> tuple[float, float]:
    """(algbw, busbw) in B/s for an operation of size S that took `seconds`."""
    factor = bus_factor(op, world_size)
    if factor is None:
        raise ValueError(f"{op} moves no data")
    algbw = size_bytes / seconds
    return algbw, algbw * factor


def peers(rank: int, world_size: int) -> tuple[int, int]:
    """send-recv: (rank this one sends to, rank it receives from)."""
    shift = world_size // 2
    return (rank + shift) % world_size, (rank - shift) % world_size


def in_place(op: str, inplace: str) -> bool | None:
    """The form to run for an `inplace` choice; None for barrier (no data)."""
    forms = FORMS[op]
    if not forms:
        return None
    if inplace == "auto":
        return forms[0]
    return inplace == "yes"


def unsupported(op: str, backend: str, dtype: str, reduce: str, inplace: str,
                world_size: int) -> str | None:
    """Why this combination is not measured (a skip, not a failure), or None."""
    if world_size < 2:
        return NEEDS_RANKS
    forms = FORMS[op]
    if inplace != "auto":
        if not forms:
            return "barrier moves no data: use inplace=auto"
        if (inplace == "yes") not in forms:
            form = "in place" if forms[0] else "out of place"
            return f"torch.distributed runs {op} only {form}: use inplace=auto"
    if reduce != "sum" and op not in REDUCING:
        return f"{op} does not reduce: reduce applies to {', '.join(REDUCING)}"
    etype = ELEMENT_TYPES[dtype]
    if backend == "mpi":
        if op in ("all-gather", "reduce-scatter"):
            return f"PyTorch's mpi backend has no {TORCH_CALLS[op].split()[0]}"
        if dtype in ("fp16", "bf16"):
            return f"PyTorch's mpi backend has no {dtype}"
        if reduce == "avg" and op in REDUCING:
            return "PyTorch's mpi backend has no avg reduction"
    if backend == "gloo" and reduce == "avg" and op in REDUCING and not etype.floating:
        return f"gloo averages floating-point data only, not {dtype}"
    if reduce == "avg" and op in REDUCING and world_size > etype.exact_limit:
        return f"the exact check of avg needs world_size <= {etype.exact_limit} for {dtype}"
    return None


# --- the operations (torch is imported only when they run) ------------------------------


@dataclass
class Prepared:
    call: Callable[[], Any]  # one operation: what is timed
    check: Callable[[], int]  # fill known data, run once, count wrong elements on this rank


def _data(seed: int) -> list[int]:
    """Data-movement values of one source: small integers, exact in every dtype, that
    differ between sources and along the buffer (period 101)."""
    return [(k + seed) % 101 + 1 for k in range(101)]


def _seed(rank: int, peer: int = 0) -> int:
    return 37 * rank + 11 * peer


def _reduction_data(rank: int, n: int, reduce: str, exact_limit: int
                    ) -> tuple[list[int], list[int]]:
    """(this rank's input, the exact result), as tiles of period P*n.

    Element k has a home rank k % n holding the signal p(k) = k % P + 1; every other rank
    holds the reduction's neutral value, so the result is exactly p(k) whatever the order
    of the arithmetic, and a missing or misplaced contribution shows.
    """
    limit = min(7, exact_limit // n) if reduce == "avg" else 7
    period = max(1, limit)
    neutral = {"sum": 0, "avg": 0, "max": 0, "min": period + 1, "prod": 1}[reduce]
    scale = n if reduce == "avg" else 1  # avg divides the sum of n * p(k) by n
    mine, expected = [], []
    for k in range(period * n):
        p = k % period + 1
        mine.append(p * scale if k % n == rank else neutral)
        expected.append(p)
    return mine, expected


def prepare(torch: ModuleType, dist: ModuleType, op: str, count: int, rank: int, n: int,
            dtype: str, reduce: str, inplace: bool | None, device: torch.device,
            backend: str) -> Prepared:
    """Buffers for one operation, the call that runs it, and its correctness check."""
    etype = ELEMENT_TYPES[dtype]
    torch_dtype = getattr(torch, etype.torch_name)
    chunk = count // n

    def empty(length: int) -> Tensor:
        return torch.empty(length, dtype=torch_dtype, device=device)

    def tile(values: list[int], length: int, offset: int = 0) -> Tensor:
        base = torch.tensor(values, dtype=torch_dtype, device=device)
        start = offset % len(values)
        reps = -(-(start + length) // len(values))
        return base.repeat(max(reps, 1))[start:start + length]

    tolerance = 4 * torch.finfo(torch_dtype).eps if reduce == "avg" and etype.floating else 0.0

    def wrong(got: Tensor, expected: Tensor) -> int:
        if tolerance:
            bad = ~torch.isclose(got, expected, rtol=tolerance, atol=0.0)
        else:
            bad = got != expected
        return int(bad.sum().item())

    call: Callable[[], Any]
    red = None
    if op in REDUCING:
        names = {"sum": "SUM", "max": "MAX", "min": "MIN", "prod": "PRODUCT", "avg": "AVG"}
        red = getattr(dist.ReduceOp, names[reduce])
        mine, result = _reduction_data(rank, n, reduce, etype.exact_limit)

    if op == "all-reduce":
        buf = empty(count)
        call = functools.partial(dist.all_reduce, buf, op=red)

        def check() -> int:
            buf.copy_(tile(mine, count))
            call()
            return wrong(buf, tile(result, count))

    elif op == "reduce-scatter":
        src = empty(count)
        out = src.narrow(0, rank * chunk, chunk) if inplace else empty(chunk)
        scatter_fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        call = functools.partial(scatter_fn, out, src, op=red)

        def check() -> int:
            src.copy_(tile(mine, count))
            call()
            return wrong(out, tile(result, chunk, rank * chunk))

    elif op == "all-gather":
        out = empty(count)
        src = out.narrow(0, rank * chunk, chunk) if inplace else empty(chunk)
        gather_fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        call = functools.partial(gather_fn, out, src)

        def check() -> int:
            out.zero_()
            src.copy_(tile(_data(_seed(rank)), chunk))
            call()
            return sum(wrong(out[q * chunk:(q + 1) * chunk], tile(_data(_seed(q)), chunk))
                       for q in range(n))

    elif op == "broadcast":
        buf = empty(count)
        call = functools.partial(dist.broadcast, buf, src=ROOT)

        def check() -> int:
            if rank == ROOT:
                buf.copy_(tile(_data(_seed(ROOT)), count))
            else:
                buf.zero_()
            call()
            return wrong(buf, tile(_data(_seed(ROOT)), count))

    elif op == "reduce":
        buf = empty(count)
        call = functools.partial(dist.reduce, buf, dst=ROOT, op=red)

        def check() -> int:
            buf.copy_(tile(mine, count))
            call()
            return wrong(buf, tile(result, count)) if rank == ROOT else 0

    elif op == "gather":
        src = empty(chunk)
        gathered = empty(count) if rank == ROOT else None
        parts = list(gathered.split(chunk)) if gathered is not None else None
        call = functools.partial(dist.gather, src, gather_list=parts, dst=ROOT)

        def check() -> int:
            src.copy_(tile(_data(_seed(rank)), chunk))
            if gathered is not None:
                gathered.zero_()
            call()
            if gathered is None:
                return 0
            return sum(wrong(gathered[q * chunk:(q + 1) * chunk], tile(_data(_seed(q)), chunk))
                       for q in range(n))

    elif op == "scatter":
        out = empty(chunk)
        scattered = empty(count) if rank == ROOT else None
        parts = list(scattered.split(chunk)) if scattered is not None else None
        call = functools.partial(dist.scatter, out, scatter_list=parts, src=ROOT)

        def check() -> int:
            if scattered is not None:
                for q in range(n):
                    scattered[q * chunk:(q + 1) * chunk].copy_(tile(_data(_seed(q)), chunk))
            out.zero_()
            call()
            return wrong(out, tile(_data(_seed(rank)), chunk))

    elif op == "all-to-all":
        src, out = empty(count), empty(count)
        call = functools.partial(dist.all_to_all_single, out, src)

        def check() -> int:
            for s in range(n):
                src[s * chunk:(s + 1) * chunk].copy_(tile(_data(_seed(rank, s)), chunk))
            out.zero_()
            call()
            return sum(wrong(out[q * chunk:(q + 1) * chunk], tile(_data(_seed(q, rank)), chunk))
                       for q in range(n))

    elif op == "send-recv":
        send, recv = empty(count), empty(count)
        to, source = peers(rank, n)
        p2p = [dist.P2POp(dist.isend, send, to), dist.P2POp(dist.irecv, recv, source)]

        def call() -> None:
            for work in dist.batch_isend_irecv(p2p):
                work.wait()

        def check() -> int:
            send.copy_(tile(_data(_seed(rank)), count))
            recv.zero_()
            call()
            return wrong(recv, tile(_data(_seed(source)), count))

    elif op == "barrier":
        if backend == "nccl":
            call = functools.partial(dist.barrier, device_ids=[device.index or 0])
        else:
            call = dist.barrier

        def check() -> int:
            call()  # every rank got through: all a barrier promises
            return 0

    else:
        raise ValueError(f"unknown collective {op!r}")
    return Prepared(call, check)


# --- measuring -------------------------------------------------------------------------


class OwnTimes:
    """The case's clock, keeping this rank's own per-call time of every timed block.

    Each sample the coordinator keeps is the slowest rank's; the spread across ranks
    needs what every rank saw itself.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.per_call: list[float] = []  # one entry per block: warm-up calls, then samples

    def now(self) -> float:
        return self._clock.now()

    def time(self, fn: Callable[[], Any], number: int) -> float:
        seconds = self._clock.time(fn, number)
        self.per_call.append(seconds / number)
        return seconds

    def kept(self, timing: Timing) -> list[float]:
        """This rank's own times of the samples `timing` kept, in order.

        They are the last blocks timed: the timing core drops only leading blocks (the
        warm-up, and samples taken before the series settled), and `warmup_calls` counts
        calls, not blocks, so it cannot index this list.
        """
        return self.per_call[len(self.per_call) - len(timing.samples):]


def counted_policy(policy: TimingPolicy, warmup: int, iters: int) -> TimingPolicy:
    """nccl-tests' -w/-n: `warmup` calls before timing, `iters` calls per sample (0 keeps
    the timing core's budgets); the number of samples still follows the noise target."""
    changes: dict[str, Any] = {}
    if warmup:
        changes.update(min_warmup_calls=warmup, warmup_time=0.0)
    if iters:
        # The block-time rule asks for more calls than any sample needs; the cap wins.
        changes.update(block_time=1e6, max_block_calls=iters)
    return dataclasses.replace(policy, **changes) if changes else policy


def library(torch: ModuleType, backend: str) -> str:
    """The collective library behind the backend, with its version where known."""
    if backend == "nccl":
        name = "RCCL" if getattr(torch.version, "hip", None) else "NCCL"
        try:
            version = torch.cuda.nccl.version()
        except Exception:  # an unusual build; the name still tells the stack apart
            return name
        text = ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)
        return f"{name} {text}"
    if backend == "gloo":
        return f"Gloo (PyTorch {torch.__version__})"
    return "MPI"


@dataclass(frozen=True)
class CollectivesParams:
    """The parameters of a collectives case (`declaration.BENCHMARK.params`)."""

    op: str
    bytes: int
    dtype: str
    reduce: str
    inplace: str
    warmup: int
    iters: int


def measure(ctx: CaseContext, params: CollectivesParams) -> CaseResult:
    """Check the operation on known data on every rank, then time it across ranks."""
    op, dtype, reduce, inplace = params.op, params.dtype, params.reduce, params.inplace
    info = ctx.dist
    world = info.world_size if info is not None else 1
    backend = info.backend if info is not None else "none"
    reason = unsupported(op, backend, dtype, reduce, inplace, world)
    if reason or info is None:
        raise CaseSkipped(reason or NEEDS_RANKS)
    etype = ELEMENT_TYPES[dtype]
    count = element_count(op, params.bytes, etype.bytes, world)
    if op != "barrier" and count == 0:
        per = f" per rank at {world} ranks" if op in SPLIT else ""
        raise CaseSkipped(f"{params.bytes} B holds no whole {dtype} element{per}")

    import torch
    import torch.distributed as dist

    device = torch.device(ctx.device.torch_device)
    form = in_place(op, inplace)
    prepared = prepare(torch, dist, op, count, info.rank, world, dtype, reduce, form, device,
                       backend)
    wrong = torch.tensor([prepared.check()], dtype=torch.int64, device=device)
    dist.all_reduce(wrong)
    size = count * etype.bytes
    label = f"{op} of {size} B {dtype}" + (f" ({reduce})" if op in REDUCING else "")
    if int(wrong.item()):
        raise CaseFailed(f"wrong result: {int(wrong.item())} wrong elements across {world} "
                         f"ranks in {label}")

    own = OwnTimes(ctx.clock)
    timed = dataclasses.replace(ctx, clock=own,
                                policy=counted_policy(ctx.policy, params.warmup, params.iters))
    timing = timed.time(prepared.call)

    # Outside the timed region: every rank's own median, for the spread across ranks.
    own_median = statistics.median(own.kept(timing))
    medians = [own_median] * world  # each replaced by that rank's
    dist.all_gather_object(medians, own_median)

    factor = bus_factor(op, world)
    peer_ranks = None
    if op == "send-recv":
        to, source = peers(info.rank, world)
        peer_ranks = Peers(to, source, f"rank + {world // 2} and rank - {world // 2} "
                           f"(mod {world})")
    details = CollectiveDetails(
        op=op,
        torch_call=f"torch.distributed.{TORCH_CALLS[op]}",
        bytes=size,
        count=count,
        dtype=dtype,
        reduce=reduce if op in REDUCING else None,
        inplace=form,
        bus_factor=factor,
        wrong_elements=0,
        world_size=world,
        nodes=info.nodes,
        backend=backend,
        library=library(torch, backend),
        rank_median_s=tuple(medians),
        rank_spread=max(medians) / min(medians) if min(medians) > 0 else None,
        time_is="slowest rank per sample",
        root=ROOT if op in ROOTED else None,
        peers=peer_ranks,
    ).to_dict()
    warnings: tuple[str, ...] = ()
    if op != "barrier" and size != params.bytes:
        whole = f"whole {dtype} elements" + (f", a multiple of {world}" if op in SPLIT else "")
        warnings = (f"moves {size} B: {params.bytes} B rounded down to {whole}",)
    if factor is None:
        return CaseResult(timing, details=details, time_name="latency", warnings=warnings)
    rates = (Rate("busbw", size * factor, "B/s"), Rate("algbw", float(size), "B/s"))
    return CaseResult(timing, rates=rates, details=details, warnings=warnings)
