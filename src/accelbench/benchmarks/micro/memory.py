"""Memory bandwidth: on-device copy and STREAM triad, and host<->device transfers.

Two conventions, each named by its figure. `bandwidth` (copy and triad) counts the bytes
read plus the bytes written, as STREAM and BabelStream do: a copy reads one buffer and
writes one (2 * size), a triad reads two and writes one (3 * size). `transfer_rate`
(h2d and d2h) counts each byte moved across the link once (size), as nvbandwidth and
TransferBench do, and as the copy matrix's `*_transfer_rate` figures do: a device copy's
`bandwidth` is twice the transfer rate of the same copy. On the CPU, copy and triad buffers
are on transparent huge pages where the kernel gives them (`host_pages`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.micro.host_pages import huge_page_share, huge_page_tensor
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseFailed, CaseResult, CaseSkipped, Rate
from accelbench.core.params import UNKEYED, Param
from accelbench.core.registry import Benchmark

if TYPE_CHECKING:
    from torch import Tensor

OPS = ("copy", "triad", "h2d", "d2h")
TRANSFERS = ("h2d", "d2h")  # across the link: bytes moved once, `transfer_rate`
# The figure of each convention: bytes read plus written; bytes moved once.
BANDWIDTH, TRANSFER_RATE = "bandwidth", "transfer_rate"
BUFFERS = {"copy": 2, "triad": 3, "h2d": 1, "d2h": 1}  # buffers moved per call
BYTE_FORMULAS = {
    "copy": "2 * buffer_bytes (read src, write dst)",
    "triad": "3 * buffer_bytes (read b and c, write a)",
    "h2d": "buffer_bytes (host to device)",
    "d2h": "buffer_bytes (device to host)",
}
TRIAD_SCALAR = 3.0  # STREAM's scalar
ELEMENT_BYTES = 4  # float32
MIB = 1 << 20
# Below this share of its buffers on huge pages, a CPU copy or triad warns (`host_pages`).
HUGE_ENOUGH = 0.5


@dataclass(frozen=True)
class MemoryParams:
    """The parameters of a memory case (`BENCHMARK.params`)."""

    op: str
    size_mib: int
    pinned: bool


def measure(ctx: CaseContext, params: MemoryParams) -> CaseResult:
    """Check the operation once, then time it bound to its buffers (nothing else runs)."""
    import torch

    op, size_mib, pinned = params.op, params.size_mib, params.pinned
    if op in TRANSFERS and ctx.device.type == "cpu":
        raise CaseSkipped("host-to-device copies need a separate device memory; the CPU has none")
    device = torch.device(ctx.device.torch_device)
    buffer_bytes = size_mib * MIB
    count = buffer_bytes // ELEMENT_BYTES
    generator = torch.Generator(device=device).manual_seed(0)

    on_host = device.type == "cpu"  # a CPU's copy and triad: buffers on huge pages

    def filled() -> Tensor:
        if on_host:
            return torch.rand(count, generator=generator, out=empty())
        return torch.rand(count, generator=generator, device=device, dtype=torch.float32)

    def empty(where: torch.device | str = device, pin: bool = False) -> Tensor:
        if on_host:
            return huge_page_tensor(count, torch.float32)
        return torch.empty(count, device=where, dtype=torch.float32, pin_memory=pin)

    buffers: list[Tensor] = []
    if op == "copy":
        src, dst = buffers = [filled(), empty()]
        call = functools.partial(dst.copy_, src)
        call()
        ok = torch.equal(dst, src)
    elif op == "triad":
        b, c, a = buffers = [filled(), filled(), empty()]
        call = functools.partial(torch.add, b, c, alpha=TRIAD_SCALAR, out=a)
        call()
        ok = torch.allclose(a, b + c * TRIAD_SCALAR, rtol=1e-6, atol=1e-6)
    elif op == "h2d":
        host = torch.rand(count, generator=torch.Generator().manual_seed(0))
        host = host.pin_memory() if pinned else host
        dev = empty()
        call = functools.partial(dev.copy_, host, non_blocking=True)
        call()
        torch.cuda.synchronize(device)
        ok = torch.equal(dev.cpu(), host)
    else:
        dev, host = filled(), empty("cpu", pinned)
        call = functools.partial(host.copy_, dev, non_blocking=True)
        call()
        torch.cuda.synchronize(device)
        ok = torch.equal(host, dev.cpu())
    if not ok:
        raise CaseFailed(f"wrong result: the {op} output differs from what it should hold")

    timing = ctx.time(call)

    moved = BUFFERS[op] * buffer_bytes
    details: dict[str, Any] = {
        "op": op,
        "element": "float32",
        "elements": count,
        "buffer_bytes": buffer_bytes,
        "bytes_per_call": moved,
        "byte_formula": BYTE_FORMULAS[op],
    }
    warnings: tuple[str, ...] = ()
    share = huge_page_share(buffers) if on_host and buffers else None
    if share is not None:
        details["huge_page_share"] = round(share, 4)
        if share < HUGE_ENOUGH:
            warnings = (
                f"{share:.0%} of the buffers on huge pages (transparent huge pages off or "
                "memory fragmented): on 4 KiB pages the bandwidth depends on where the "
                "pages lie, and processes differ by 10-20%",
            )
    if op == "triad":
        details["formula"] = f"a = b + {TRIAD_SCALAR:g} * c"
    if op in TRANSFERS:
        details["pinned"] = pinned
        peak = None  # link bandwidth has no published per-device peak here
    else:
        peak = ctx.peak_bandwidth()
        l2 = ctx.device.l2_cache_bytes
        if l2 and moved < 4 * l2:
            warnings += (
                f"{moved / MIB:g} MiB moved per call is less than 4x the L2 cache "
                f"({l2 / MIB:g} MiB): this may measure cache rather than memory bandwidth",
            )
    return CaseResult(
        timing=timing,
        rates=(Rate(TRANSFER_RATE if op in TRANSFERS else BANDWIDTH, moved, "B/s", peak),),
        details=details,
        warnings=warnings,
    )


BENCHMARK = Benchmark(
    name="memory",
    family="micro",
    summary="Memory bandwidth (B/s, bytes read + written, as STREAM counts them): device "
    "copy and triad; host<->device transfer rate (B/s, bytes moved once)",
    entry="accelbench.benchmarks.micro.memory:measure",
    params=(
        Param(
            "op",
            "str",
            "copy",
            help="copy and triad on the device; h2d and d2h across the link",
            choices=OPS,
        ),
        Param("size_mib", "int", 256, help="size of one buffer in MiB", minimum=1),
        Param("pinned", "bool", True, help="page-locked host buffer (h2d and d2h only)",
              only_when=("op", TRANSFERS), outside=UNKEYED),
    ),
    devices=("cpu", "cuda"),
    timeout_s=300.0,
    views=("accelbench.benchmarks.micro.view:sections",),
    typed=MemoryParams,
)
