"""The copies of the copy matrix: one function per kind of path, each checking that the
bytes arrived (a known pattern, compared) before it times anything, then timing the copy
with the case's timing policy.

  host      one NUMA node's CPUs copying within another node's memory (every pair of
            nodes: local and remote bandwidth, as Intel MLC's matrix)
  d2d       GPU i to GPU j through the copy engines (`copy_` between devices; PyTorch
            enables peer access where the driver allows it), one way and both at once
  d2d-kernel  GPU i to GPU j through a copy kernel: a copy that is not one plain
            memcpy (the rows of a padded buffer), which PyTorch runs as a kernel on GPU
            i writing into GPU j's memory over the link (only where peer access is on)
  d2d-nopeer  the d2d copy with peer access turned off both ways (peer_access): the
            path of a process that cannot map the peer, staged by the driver
  h2d, d2h  page-locked host memory placed on each NUMA node to and from each GPU
  all       every GPU copying to every other at once (the fabric under full load)

A path's figure is bytes copied per second (a copy reads and writes that many bytes).
Host memory is placed on its node by numa_place, and where the pages of every host
buffer a path copies from or into lie is recorded (`placed`).

Copies meant to run at once (both ways, all at once) each run on streams of their own
(`at_once`): PyTorch runs a copy on the current stream of its source GPU and, between
two GPUs, makes it wait for the destination GPU's current stream and that stream wait
for it (aten/src/ATen/native/cuda/Copy.cu, copy_device_to_device), so copies sharing a
destination's current stream would run one after another.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.health import numa_place
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseFailed

if TYPE_CHECKING:
    from torch import Tensor


@dataclass(frozen=True)
class CopyPath:
    kind: str  # host, d2d, d2d-bidir, d2d-kernel, d2d-nopeer, h2d, d2h, all
    source: str  # "node0", "gpu1"
    target: str
    nbytes: int  # copied per call
    seconds: tuple[float, ...]  # per call, one per sample
    # Where the pages of the host buffers it copies from or into were found ("node0",
    # "node0,node1"), where memory was placed on a NUMA node and the kernel could say.
    placed: str | None = None

    @property
    def bandwidth(self) -> float:
        ordered = sorted(self.seconds)
        median = ordered[len(ordered) // 2] if len(ordered) % 2 else (
            0.5 * (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]))
        return self.nbytes / median if median > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "source": self.source, "target": self.target,
                "bytes": self.nbytes, "bandwidth": self.bandwidth,
                "seconds": list(self.seconds), "placed": self.placed}


def pattern(torch: ModuleType, nbytes: int, device: Any) -> Tensor:
    """Bytes that are wrong in a telling way if any block is lost, repeated or misplaced."""
    return (torch.arange(nbytes, dtype=torch.int64, device=device) % 251).to(torch.uint8)


def check_arrived(torch: ModuleType, what: str, got: Tensor, expected: Tensor) -> None:
    """CaseFailed naming the first wrong byte, before anything is timed."""
    wrong = (got.to(expected.device) != expected).nonzero()
    if wrong.numel():
        first = int(wrong[0])
        raise CaseFailed(f"wrong data: {what}: {wrong.numel()} of {expected.numel()} bytes "
                         f"differ after the copy, first at byte {first}")


def host_path(torch: ModuleType, ctx: CaseContext, cpus: Sequence[int], node: int,
              memory_cpus: Sequence[int], memory_node: int, nbytes: int) -> CopyPath:
    """Node `node`'s CPUs copying between two buffers placed on `memory_node` (where both
    lie is checked: a destination elsewhere would time another path)."""
    expected = pattern(torch, nbytes, "cpu")
    src = numa_place.placed(torch, memory_cpus, nbytes)
    dst = numa_place.placed(torch, memory_cpus, nbytes)
    src.copy_(expected)
    where = numa_place.found_on(src, dst)
    threads = torch.get_num_threads()
    with numa_place.pinned(cpus):
        # The case's threads, but no more than the node has CPUs: more would only queue.
        torch.set_num_threads(max(1, min(threads, len(cpus))))
        try:
            dst.copy_(src)
            check_arrived(torch, f"node{node} copying in node{memory_node}'s memory", dst,
                          expected)
            timing = ctx.time(lambda: dst.copy_(src))
        finally:
            torch.set_num_threads(threads)
    return CopyPath("host", f"node{node}", f"node{memory_node}", nbytes, timing.samples, where)


def synced(torch: ModuleType, devices: Sequence[int],
           fn: Callable[[], object]) -> Callable[[], None]:
    """fn, then every GPU in `devices` synchronised: work timed by the host clock."""
    def call() -> None:
        fn()
        for d in devices:
            torch.cuda.synchronize(d)
    return call


def at_once(torch: ModuleType, copies: Sequence[tuple[Tensor, Tensor]]
            ) -> Callable[[], None]:
    """A call that issues every copy (destination, source) at once, each on streams of
    its own: one on each GPU it touches, made current there for the copy, so no two
    copies share a stream PyTorch would order them on (the module's docstring). Each
    copy's streams first wait for the work queued on those GPUs' current streams (the
    bytes it copies being made), and those streams wait for the copies after, through
    events: work queued after the call, a device clock's end event included, follows
    every copy. (PyTorch hands out streams round-robin from a pool of 32 per device
    (c10/cuda/CUDAStream.cpp, kStreamsPerPool), so a node of up to 16 GPUs, each
    copying to and from every other, still gets a distinct stream for every copy.)"""
    lanes = [tuple(torch.cuda.Stream(device=d) for d in _gpus(dst, src)) for dst, src in copies]

    def issue() -> None:
        for (dst, src), streams in zip(copies, lanes, strict=True):
            for stream in streams:
                stream.wait_stream(torch.cuda.current_stream(stream.device))
            with contextlib.ExitStack() as current:
                for stream in streams:
                    current.enter_context(torch.cuda.stream(stream))
                dst.copy_(src, non_blocking=True)
        for streams in lanes:
            for stream in streams:
                torch.cuda.current_stream(stream.device).wait_stream(stream)

    return issue


def _gpus(*tensors: Tensor) -> list[int]:
    return sorted({int(t.device.index) for t in tensors if t.device.type == "cuda"})


def device_path(torch: ModuleType, ctx: CaseContext, src_dev: int, dst_dev: int,
                nbytes: int) -> CopyPath:
    src = pattern(torch, nbytes, f"cuda:{src_dev}")
    dst = torch.zeros(nbytes, dtype=torch.uint8, device=f"cuda:{dst_dev}")
    call = synced(torch, (src_dev, dst_dev), lambda: dst.copy_(src, non_blocking=True))
    call()
    check_arrived(torch, f"gpu{src_dev} to gpu{dst_dev}", dst, src.to(dst.device))
    return CopyPath("d2d", f"gpu{src_dev}", f"gpu{dst_dev}", nbytes, ctx.time(call).samples)


# The kernel path's buffer: rows of 1 MiB, each followed by 64 bytes the copy leaves out,
# so the copy is not one memcpy but stays a stream of whole, aligned rows.
_ROW_INTS, _PAD_INTS = 1 << 18, 16


def kernel_path(torch: ModuleType, ctx: CaseContext, src_dev: int, dst_dev: int,
                nbytes: int) -> CopyPath:
    """GPU `src_dev` to `dst_dev` through PyTorch's copy kernel (peer access must be on,
    or PyTorch would stage the copy instead of running the kernel across the link)."""
    rows = max(1, nbytes // (4 * _ROW_INTS))
    padded = (torch.arange(rows * (_ROW_INTS + _PAD_INTS), dtype=torch.int64,
                           device=f"cuda:{src_dev}") % 251).to(torch.int32)
    src = padded.view(rows, _ROW_INTS + _PAD_INTS)[:, :_ROW_INTS]
    dst = torch.zeros(rows, _ROW_INTS, dtype=torch.int32, device=f"cuda:{dst_dev}")
    call = synced(torch, (src_dev, dst_dev), lambda: dst.copy_(src, non_blocking=True))
    call()
    check_arrived(torch, f"gpu{src_dev} to gpu{dst_dev} (copy kernel)", dst,
                  src.contiguous().to(dst.device))
    return CopyPath("d2d-kernel", f"gpu{src_dev}", f"gpu{dst_dev}", rows * _ROW_INTS * 4,
                    ctx.time(call).samples)


def peer_off_path(torch: ModuleType, ctx: CaseContext, runtime: tuple[Any, str],
                  src_dev: int, dst_dev: int, nbytes: int) -> CopyPath:
    """The one-way copy between two GPUs with their peer access off both ways."""
    from accelbench.benchmarks.health.peer_access import PeerAccessOff

    library, prefix = runtime
    with PeerAccessOff(torch, library, prefix, src_dev, dst_dev):
        path = device_path(torch, ctx, src_dev, dst_dev, nbytes)
    return dataclasses.replace(path, kind="d2d-nopeer")


def both_ways(torch: ModuleType, ctx: CaseContext, a: int, b: int, nbytes: int) -> CopyPath:
    """GPU a to b and b to a at once, each copy on streams of its own."""
    xa, xb = pattern(torch, nbytes, f"cuda:{a}"), pattern(torch, nbytes, f"cuda:{b}")
    ya = torch.zeros(nbytes, dtype=torch.uint8, device=f"cuda:{b}")
    yb = torch.zeros(nbytes, dtype=torch.uint8, device=f"cuda:{a}")
    call = synced(torch, (a, b), at_once(torch, [(ya, xa), (yb, xb)]))
    call()
    check_arrived(torch, f"gpu{a} to gpu{b} (both ways)", ya, xa.to(ya.device))
    check_arrived(torch, f"gpu{b} to gpu{a} (both ways)", yb, xb.to(yb.device))
    return CopyPath("d2d-bidir", f"gpu{a}", f"gpu{b}", 2 * nbytes, ctx.time(call).samples)


def host_device_path(torch: ModuleType, ctx: CaseContext, node: int, cpus: Sequence[int],
                     device: int, to_device: bool, nbytes: int) -> CopyPath:
    """Page-locked memory placed on `node` to GPU `device` (or back): the host buffer is
    the copy's source one way and its destination the other, and where it lies is
    checked either way."""
    expected = pattern(torch, nbytes, "cpu")
    with numa_place.page_locked(torch, numa_place.placed(torch, cpus, nbytes)) as host:
        where = numa_place.found_on(host)
        if to_device:
            host.copy_(expected)
            gpu = torch.zeros(nbytes, dtype=torch.uint8, device=f"cuda:{device}")
            call = synced(torch, (device,), lambda: gpu.copy_(host, non_blocking=True))
            call()
            check_arrived(torch, f"node{node} to gpu{device}", gpu, expected.to(gpu.device))
            return CopyPath("h2d", f"node{node}", f"gpu{device}", nbytes,
                            ctx.time(call).samples, where)
        gpu = pattern(torch, nbytes, f"cuda:{device}")
        call = synced(torch, (device,), lambda: host.copy_(gpu, non_blocking=True))
        call()
        check_arrived(torch, f"gpu{device} to node{node}", host, expected)
        return CopyPath("d2h", f"gpu{device}", f"node{node}", nbytes, ctx.time(call).samples,
                        where)


def all_to_all(torch: ModuleType, ctx: CaseContext, devices: Sequence[int],
               nbytes: int) -> CopyPath:
    """Every ordered pair of GPUs copying at once, each pair on streams of its own (one
    on each of its two GPUs), so every link carries a copy at the same time."""
    pairs = [(a, b) for a in devices for b in devices if a != b]
    src = {a: pattern(torch, nbytes, f"cuda:{a}") for a in devices}
    dst = {(a, b): torch.zeros(nbytes, dtype=torch.uint8, device=f"cuda:{b}")
           for a, b in pairs}
    call = synced(torch, devices, at_once(torch, [(dst[pair], src[pair[0]]) for pair in pairs]))
    call()
    for a, b in pairs:
        check_arrived(torch, f"gpu{a} to gpu{b} (all at once)", dst[(a, b)],
                      src[a].to(dst[(a, b)].device))
    return CopyPath("all", "every gpu", "every gpu", nbytes * len(pairs), ctx.time(call).samples)
