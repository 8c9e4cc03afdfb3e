"""Unified memory: what a GPU pays to reach memory the CPU reaches too.

Memory kinds (`memory`; unified_buffers): `device` memory, `host` memory (page-locked and
mapped into the GPU's address space: zero-copy) and `managed` memory (hipMallocManaged /
cudaMallocManaged). Where managed memory lives when the GPU uses it depends on the
platform and the device (env.apu.managed_memory), and each case records it
(`managed_memory`, `managed_memory_by`) with XNACK's state (`xnack`, `xnack_by`,
`xnack_feature`, `hsa_xnack`) and whether the GPU is an APU (`integrated`):

- CUDA: pages migrate to the processor that touches them, on demand where the device has
  concurrentManagedAccess (Pascal and later on Linux, HMM and ATS systems included),
  all at each kernel's launch where it has not (before Pascal, Windows). Either way the
  GPU's kernel runs on device memory once the pages have moved: `migrates`.
- ROCm, discrete GPU, XNACK on (gcnArchName `xnack+`: HSA_XNACK=1 on gfx90a / gfx942 with
  a kernel driver that supports HMM): the GPU's page faults migrate the pages: `migrates`.
- ROCm, discrete GPU, XNACK off (`xnack-`, HSA_XNACK unset or 0, or a GPU or driver
  without it): the GPU cannot retry after a fault, so ROCm keeps managed memory in host
  memory and the GPU reaches it over the link, as it does mapped host memory; nothing
  migrates: `host-resident`.
- An APU (MI300A, Strix Halo): one memory for CPU and GPU; nothing migrates, XNACK or
  not: `one memory`.

Operations (`op`):

- bandwidth: one GPU kernel, STREAM's scale (b = 3.0 * a, float32), with both buffers of
  the kind; 2 * buffer_bytes per call. On host memory the kernel reads and writes across
  the link (or, on an APU, the one memory); on managed memory the CPU writes the input
  first and the warm-up moves it where it migrates, so the figure is the resident
  bandwidth after the first touch; where it is host-resident the figure is host-resident
  access over the link, and is named so. The same kernel on device memory is the
  yardstick.
- first-touch (managed): every call, the CPU reads and writes every element (x += 1,
  untimed), then one GPU kernel does (x += 1), timed by device events: the cost of the
  first GPU touch of pages the CPU touched last (a migration where pages migrate,
  host-resident access over the link where they do not). buffer_bytes per call.
- cpu-touch (managed): the other half of the same cycle: the GPU touched every page last
  (untimed, waited for), then the CPU reads and writes every element, on the host clock:
  the cost of touching it from the CPU again. buffer_bytes per call.
- handoff: a synchronous exchange of one value, per round trip on the host clock: the
  CPU writes a value, a GPU kernel reads it and writes value + 1, the CPU waits for the
  GPU and reads the answer (checked every time). On device memory the value goes by
  copies through page-locked staging (H2D, kernel, D2H); on host and managed memory the
  CPU and the kernel use the same cells.

Each bandwidth figure says what it measures (`measures`) and what its peak is a share of
(`peak_of`). It is a share of the device memory's published peak where the kernel runs
in device memory (device bandwidth, and managed bandwidth where pages migrate); on an
APU (env.apu), where CPU and GPU share one memory, every bandwidth is a share of that
memory's peak. A figure whose bytes crossed the host link (mapped host memory,
host-resident managed memory, a migration) is a share of that link's peak (env.pcie: the
narrowest PCIe link on the GPU's path, at its maximum speed and width, both ways together
where the figure counts reads in and writes out, one way where it counts what each way
carried), never of the device memory's; the link is recorded (`host_link`). A CPU's touch
of host memory, and a figure whose placement is not known, get no peak.
A case asks for no more than FREE_SHARE of the memory free (device memory from
torch.cuda.mem_get_info for device and managed buffers, host memory for host buffers)
and is skipped before allocating anything otherwise: managed memory beyond what is free
can hang a GPU. On the CPU there is nothing to share: the cases are skipped.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.micro.gpu_runtime import (
    CAN_MAP_HOST_MEMORY,
    CONCURRENT_MANAGED_ACCESS,
    MANAGED_MEMORY,
    PAGEABLE_MEMORY_ACCESS,
    Runtime,
    RuntimeCallFailed,
    RuntimeUnavailable,
    open_runtime,
)
from accelbench.benchmarks.micro.unified_buffers import KINDS, Buffers, cells
from accelbench.benchmarks.micro.view import LABEL_NOTE
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseFailed, CaseResult, CaseSkipped, Rate
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark
from accelbench.core.timing import Clock, PerfCounterClock, Timing

if TYPE_CHECKING:
    from types import ModuleType

    import torch

    from accelbench.env.apu import ManagedMemory, MemoryModel
    from accelbench.env.pcie import HostLink

OPS = ("bandwidth", "first-touch", "cpu-touch", "handoff")
TOUCH_OPS = ("first-touch", "cpu-touch")
KIND_OPS = ("bandwidth", "handoff")  # the touch operations measure managed memory
SIZED_OPS = ("bandwidth", *TOUCH_OPS)
BUFFERS = {"bandwidth": 2, "first-touch": 1, "cpu-touch": 1}
BYTE_FORMULAS = {
    "bandwidth": "2 * buffer_bytes (read a, write b)",
    "first-touch": "buffer_bytes (the GPU reads and writes every element once)",
    "cpu-touch": "buffer_bytes (the CPU reads and writes every element once)",
}
TIMED = {
    "bandwidth": "torch.mul(a, 3.0, out=b) on the GPU, device events",
    "first-touch": "x.add_(1) on the GPU after the CPU's x.add_(1), device events; the "
                   "CPU's part is not timed",
    "cpu-touch": "x.add_(1) on the CPU after the GPU's x.add_(1), host clock; the GPU's "
                 "part is not timed",
    "handoff": "one round trip, host clock: CPU writes, GPU kernel adds 1, CPU waits "
               "and reads the answer",
}
SCALE = 3.0  # STREAM's scalar
ELEMENT_BYTES = 4  # float32
MIB = 1 << 20
FREE_SHARE = 0.9  # of the free memory a case may ask for
CHECK_CHUNK = 1 << 24  # elements compared at once on the GPU
CHECK_SAMPLE = 4096  # elements checked against the CPU's own product
VALUE_MASK = (1 << 30) - 1  # hand-off values stay well inside int32


@dataclasses.dataclass(frozen=True)
class UnifiedParams:
    """The parameters of a unified-memory case (`BENCHMARK.params`)."""

    op: str
    memory: str | None = None
    size_mib: int | None = None


def measure(ctx: CaseContext, params: UnifiedParams) -> CaseResult:
    """Reach the memory kind, check the size against what is free, check the operation
    once, then time it."""
    op = params.op
    # Left out for the touch operations, which measure managed memory.
    kind = "managed" if params.memory is None else params.memory
    if ctx.device.type != "cuda":
        raise CaseSkipped("unified memory is memory a GPU and the CPU share; on the CPU "
                          "alone there is nothing to share")
    runtime = None if kind == "device" else reach_runtime(ctx.device, kind)

    import torch

    device = torch.device(ctx.device.torch_device)
    count = 2
    if op in SIZED_OPS:
        assert params.size_mib is not None  # given for every sized operation
        count = params.size_mib * MIB // ELEMENT_BYTES
        needed = BUFFERS[op] * count * ELEMENT_BYTES
        refusal = too_large(kind, needed, BUFFERS[op], params.size_mib,
                            free_bytes(torch, device, kind))
        if refusal:
            raise CaseSkipped(refusal)
    model = device_memory_model(torch, ctx.device)
    details: dict[str, Any] = {"op": op, "memory": kind, "timed": TIMED[op]}
    try:
        with Buffers(torch, device, runtime) as buffers:
            if op == "bandwidth":
                timing = _bandwidth(ctx, torch, buffers, kind, count, device)
            elif op in TOUCH_OPS:
                timing = _touch(ctx, torch, buffers, op, count, device)
            else:
                timing = _handoff(ctx, torch, buffers, kind, device)
            details.update(allocation_details(kind, runtime, ctx.device.index or 0))
    except RuntimeCallFailed as exc:  # the support and the size were checked: a failure
        raise CaseFailed(f"{kind} memory could not be allocated: {exc}") from None
    if op == "cpu-touch":
        details["cpu_threads"] = torch.get_num_threads()
    if op == "handoff" and kind == "device":
        details["staging"] = "page-locked host memory from torch (pin_memory=True)"
    return record(op, kind, timing, count * ELEMENT_BYTES if op in SIZED_OPS else 0,
                  model, ctx, details, device_host_link(torch, ctx.device))


# -- reaching the memory -------------------------------------------------------------


def reach_runtime(device: DeviceInfo, kind: str) -> Runtime:
    """The runtime library, on the device, able to allocate `kind` memory; the case is
    skipped with the reason when it cannot be reached or the device cannot."""
    what = "managed memory" if kind == "managed" else "mapped host memory"
    key = MANAGED_MEMORY if kind == "managed" else CAN_MAP_HOST_MEMORY
    index = device.index or 0
    try:
        runtime = open_runtime(device.platform)
        runtime.set_device(index)
        supported = runtime.attribute(key, index)
    except (RuntimeUnavailable, RuntimeCallFailed) as exc:
        raise CaseSkipped(f"{what} cannot be reached through the GPU runtime: {exc}") from None
    if not supported:
        raise CaseSkipped(f"this device cannot use {what} on this system "
                          f"({runtime.attribute_name(key)} is 0)")
    return runtime


def free_bytes(torch: ModuleType, device: torch.device, kind: str) -> int:
    """What is free for buffers of `kind`: device memory for device and managed buffers
    (managed memory lives there once the GPU touches it), host memory for host ones."""
    if kind == "host":
        import psutil

        return int(psutil.virtual_memory().available)
    free, _total = torch.cuda.mem_get_info(device)
    return int(free)


def too_large(kind: str, needed: int, buffers: int, size_mib: int, free: int) -> str | None:
    """Why `needed` bytes of `kind` memory are refused (more than FREE_SHARE of `free`),
    or None when they fit."""
    if needed <= FREE_SHARE * free:
        return None
    where = "host" if kind == "host" else "device"
    return (f"needs {needed / 2**30:.2f} GiB of {kind} memory ({buffers} x {size_mib} MiB), "
            f"more than {FREE_SHARE:.0%} of the {free / 2**30:.2f} GiB of {where} memory "
            f"free: nothing was allocated (more {kind} memory than is free can hang the GPU)")


def device_memory_model(torch: ModuleType, device: DeviceInfo) -> MemoryModel | None:
    from accelbench.env.apu import memory_model

    return memory_model(torch.cuda.get_device_properties(device.index or 0), device,
                        os.environ)


def device_host_link(torch: ModuleType, device: DeviceInfo) -> HostLink | None:
    """The GPU's host link, read after the timed part (a link can train down at idle),
    found by the PCI address PyTorch reports; None where PyTorch or sysfs tells none."""
    from accelbench.env.pcie import host_link
    from accelbench.env.telemetry.sources import DeviceAddress

    address = DeviceAddress.of(torch.cuda.get_device_properties(device.index or 0))
    return host_link(address.pci) if address.pci is not None else None


def allocation_details(kind: str, runtime: Runtime | None, index: int) -> dict[str, Any]:
    """How the memory was allocated, and what the runtime says of managed memory."""
    if runtime is None:
        return {"allocated_with": "torch.empty (PyTorch's caching allocator)"}
    prefix = runtime.api.prefix
    out: dict[str, Any] = {"runtime_library": runtime.path,
                           "runtime_version": runtime.version()}
    if kind == "host":
        out["allocated_with"] = f"{runtime.host_alloc_name()} ({prefix}HostAllocMapped)"
        return out
    out["allocated_with"] = f"{prefix}MallocManaged ({prefix}MemAttachGlobal)"
    for key in (CONCURRENT_MANAGED_ACCESS, PAGEABLE_MEMORY_ACCESS):
        try:
            out[key] = bool(runtime.attribute(key, index))
        except (RuntimeUnavailable, RuntimeCallFailed):
            out[key] = None
    return out


# -- the operations ------------------------------------------------------------------


class AfterEach:
    """A clock that runs `prepare` before every call and leaves it out of the time."""

    def __init__(self, inner: Clock, prepare: Callable[[], Any]) -> None:
        self._inner = inner
        self._prepare = prepare

    def now(self) -> float:
        return self._inner.now()

    def time(self, fn: Callable[[], Any], number: int) -> float:
        total = 0.0
        for _ in range(number):
            self._prepare()
            total += self._inner.time(fn, 1)
        return total


def _bandwidth(ctx: CaseContext, torch: ModuleType, buffers: Buffers, kind: str, count: int,
               device: torch.device) -> Timing:
    a, b = buffers.make(kind, count), buffers.make(kind, count)
    if a.cpu is not None:  # the CPU writes the input where it can: its first touch
        a.cpu.uniform_(generator=torch.Generator().manual_seed(0))
    else:
        a.gpu.uniform_(generator=torch.Generator(device=device).manual_seed(0))
    call = functools.partial(torch.mul, a.gpu, SCALE, out=b.gpu)
    call()
    check_scaled(torch, a.gpu, b.gpu)
    return ctx.time(call)


def check_scaled(torch: ModuleType, a: torch.Tensor, b: torch.Tensor) -> None:
    """b holds 3.0 * a everywhere (compared on the GPU, chunk by chunk, so that no pages
    move to the CPU), and evenly spaced elements agree with the CPU's own product."""
    count = a.numel()
    for start in range(0, count, CHECK_CHUNK):
        end = min(count, start + CHECK_CHUNK)
        if not torch.equal(b[start:end], a[start:end] * SCALE):
            raise CaseFailed(f"wrong result: b differs from {SCALE:g} * a in elements "
                             f"{start}..{end - 1}")
    step = max(1, count // CHECK_SAMPLE)  # integer positions: float32 cannot count so far
    index = torch.arange(0, count, step, device=a.device, dtype=torch.int64)
    if not torch.equal(b.index_select(0, index).cpu(), a.index_select(0, index).cpu() * SCALE):
        raise CaseFailed(f"wrong result: the GPU's {SCALE:g} * a differs from the CPU's")


def _touch(ctx: CaseContext, torch: ModuleType, buffers: Buffers, op: str, count: int,
           device: torch.device) -> Timing:
    x = buffers.make("managed", count)
    assert x.cpu is not None
    cpu_touch = functools.partial(x.cpu.add_, 1)
    gpu_touch = functools.partial(x.gpu.add_, 1)

    def gpu_touch_and_wait() -> None:
        gpu_touch()
        torch.cuda.synchronize(device)

    x.cpu.zero_()  # the CPU touches every page first
    cpu_touch()
    gpu_touch_and_wait()
    low, high = (float(v) for v in torch.aminmax(x.gpu))
    if low != high or low != 2.0:
        raise CaseFailed(f"wrong result: after one CPU and one GPU increment of zeros the "
                         f"managed buffer holds {low:g} to {high:g}, not 2 everywhere")
    if op == "first-touch":
        timed = dataclasses.replace(ctx, clock=AfterEach(ctx.clock, cpu_touch))
        return timed.time(gpu_touch)
    timed = dataclasses.replace(ctx, clock=AfterEach(PerfCounterClock(), gpu_touch_and_wait))
    return timed.time(cpu_touch)


class RoundTrip:
    """One hand-off per call: the CPU writes a new value into cells[0], `exchange` has
    the GPU write value + 1 into cells[1], the CPU waits for the GPU and reads it."""

    def __init__(self, cells: Any, exchange: Callable[[], Any], wait: Callable[[], Any]
                 ) -> None:
        self.cells = cells
        self.exchange = exchange
        self.wait = wait
        self.value = 0
        self.calls = 0
        self.wrong = 0

    def __call__(self) -> None:
        value = self.value = (self.value + 1) & VALUE_MASK
        self.cells[0] = value
        self.exchange()
        self.wait()
        self.calls += 1
        if self.cells[1] != value + 1:
            self.wrong += 1


def _handoff(ctx: CaseContext, torch: ModuleType, buffers: Buffers, kind: str,
             device: torch.device) -> Timing:
    exchange: Callable[[], Any]
    if kind == "device":
        on_gpu = buffers.make("device", 2, "int32").gpu
        staging = torch.zeros(2, dtype=torch.int32, pin_memory=True)
        shared = cells(staging.data_ptr(), 2)
        g_in, g_out, s_in, s_out = on_gpu[0:1], on_gpu[1:2], staging[0:1], staging[1:2]

        def exchange() -> None:
            g_in.copy_(s_in, non_blocking=True)
            torch.add(g_in, 1, out=g_out)
            s_out.copy_(g_out, non_blocking=True)
    else:
        both = buffers.make(kind, 2, "int32")
        shared = cells(both.address, 2)
        g_in, g_out = both.gpu[0:1], both.gpu[1:2]
        exchange = functools.partial(torch.add, g_in, 1, out=g_out)
    trip = RoundTrip(shared, exchange, torch.cuda.current_stream(device).synchronize)
    trip()
    if trip.wrong:
        raise CaseFailed(f"wrong result: the GPU's answer through {kind} memory was not "
                         "the CPU's value + 1")
    timing = dataclasses.replace(ctx, clock=PerfCounterClock()).time(trip)
    if trip.wrong:
        raise CaseFailed(f"wrong result: {trip.wrong} of {trip.calls} round trips through "
                         f"{kind} memory read back a wrong answer")
    return timing


# -- the result ----------------------------------------------------------------------


def managed_placement(kind: str, model: MemoryModel | None, platform: str
                      ) -> ManagedMemory | None:
    """Where the case's managed memory lived (env.apu); None for other kinds."""
    from accelbench.env.apu import UNKNOWN, ManagedMemory, managed_memory

    if kind != "managed":
        return None
    if model is None:
        return ManagedMemory(UNKNOWN, "no memory model for this device")
    return managed_memory(model, platform)


def measures(op: str, kind: str, model: MemoryModel | None,
             placement: ManagedMemory | None) -> str:
    """What a bandwidth figure measures, in words, by what happened to the memory."""
    from accelbench.env.apu import HOST_RESIDENT, MIGRATES, ONE_MEMORY

    if kind == "device":
        return "device-memory bandwidth (the yardstick)"
    if kind == "host":
        if model is not None and model.integrated:
            return "zero-copy access to the one memory (an APU)"
        return "zero-copy access over the link (mapped host memory)"
    where = placement.placement if placement is not None else None
    if where == MIGRATES:
        return {
            "bandwidth": "resident bandwidth (managed pages in device memory after the "
                         "first touch moved them)",
            "first-touch": "first-touch migration (the GPU's touch moves the pages the CPU "
                           "touched to device memory)",
            "cpu-touch": "CPU-touch migration (the CPU's touch moves the pages the GPU "
                         "touched back to host memory)",
        }[op]
    if where == HOST_RESIDENT:
        if op == "cpu-touch":
            return ("host-resident access by the CPU (the pages never left host memory; "
                    "no page migration without XNACK)")
        return ("host-resident access over the link (the GPU reads and writes host "
                "memory; no page migration without XNACK)")
    if where == ONE_MEMORY:
        return {
            "bandwidth": "managed bandwidth in the one memory (an APU: nothing migrates)",
            "first-touch": "first GPU touch of the one memory (an APU: nothing migrates)",
            "cpu-touch": "CPU touch of the one memory (an APU: nothing migrates)",
        }[op]
    return ("managed memory of unknown placement (XNACK's state is not known: resident "
            "where pages moved, host-resident across the link where not)")


def bandwidth_peak(op: str, kind: str, model: MemoryModel | None,
                   placement: ManagedMemory | None, device_peak: float | None,
                   link: HostLink | None = None) -> tuple[float | None, str]:
    """The peak a bandwidth is a share of, and what it is the peak of: the memory the
    kernel ran in, or the host link where the bytes crossed it (crossed_link)."""
    from accelbench.env.apu import HOST_RESIDENT, MIGRATES

    if model is not None and model.integrated:
        if device_peak is None:
            return None, "no published peak for this device"
        return device_peak, "the one memory the CPU and the GPU share (an APU)"
    where = placement.placement if placement is not None else None
    if op == "bandwidth" and (kind == "device" or where == MIGRATES):
        if device_peak is None:
            return None, "no published peak for this device"
        return device_peak, "device memory"
    crossed = crossed_link(op, kind, where)
    if crossed is None:
        return None, _NOT_CROSSED[where == HOST_RESIDENT]
    if link is None:
        return None, ("none: the bytes crossed the host link, and sysfs shows no PCIe link "
                      "with a known speed and width for this GPU (a virtual machine, or a "
                      "GPU it does not list)")
    if crossed == BOTH_WAYS:
        return 2 * link.per_direction, (f"the host link, {link.describe()}, both ways "
                                        "together (reads come in as writes go out)")
    return link.per_direction, f"the host link, {link.describe()}, one way"


BOTH_WAYS, ONE_WAY = "both ways", "one way"
_NOT_CROSSED = {
    True: ("none: the CPU touched host memory, where managed memory stays without XNACK, "
           "and host memory has no published peak here"),
    False: ("none: XNACK's state is not known, so whether the bytes stayed in device or "
            "host memory or crossed the link is not known"),
}


def crossed_link(op: str, kind: str, where: str | None) -> str | None:
    """How a figure's bytes crossed the host link: BOTH_WAYS where it counts reads coming
    in and writes going out together, ONE_WAY where it counts what each way carried (a
    migration one way; a first touch of host-resident memory, which reads every element
    in and writes it out, each way carrying the bytes it counts); None where they did not
    cross it, or where that is not known."""
    from accelbench.env.apu import HOST_RESIDENT, MIGRATES, UNKNOWN

    if kind == "host":
        return BOTH_WAYS if op == "bandwidth" else None
    if kind != "managed" or op == "handoff":
        return None
    if where == HOST_RESIDENT:
        return {"bandwidth": BOTH_WAYS, "first-touch": ONE_WAY}.get(op)
    if where == MIGRATES:
        return ONE_WAY if op in ("first-touch", "cpu-touch") else None
    if where == UNKNOWN and op == "first-touch":
        return ONE_WAY  # a migration in, or reads in and writes out: each way, the bytes
    return None


def record(op: str, kind: str, timing: Timing, buffer_bytes: int,
           model: MemoryModel | None, ctx: CaseContext, details: dict[str, Any],
           link: HostLink | None = None) -> CaseResult:
    """The figures of a case: for a hand-off its latency, else a bandwidth named by what
    happened to the memory, with the peak it is a share of (on an APU, the shared
    memory's for every kind)."""
    from accelbench.env.apu import HOST_RESIDENT, UNKNOWN

    placement = managed_placement(kind, model, ctx.device.platform)
    details = {**details, **(model.to_dict() if model is not None else {}),
               **(placement.to_dict() if placement is not None else {})}
    if op == "handoff":
        details.update({"element": "int32", "values_per_round_trip": 1})
        return CaseResult(timing=timing, details=details, time_name="latency")
    moved = BUFFERS["bandwidth"] * buffer_bytes if op == "bandwidth" else buffer_bytes
    peak, peak_of = bandwidth_peak(op, kind, model, placement, ctx.peak_bandwidth(), link)
    if link is not None and crossed_link(op, kind, placement.placement if placement else None):
        details["host_link"] = link.to_dict()
    details.update({
        "element": "float32",
        "elements": buffer_bytes // ELEMENT_BYTES,
        "buffer_bytes": buffer_bytes,
        "bytes_per_call": moved,
        "byte_formula": BYTE_FORMULAS[op],
        "measures": measures(op, kind, model, placement),
        "peak_of": peak_of,
    })
    if op == "bandwidth":
        details["formula"] = f"b = {SCALE:g} * a"
    warnings: list[str] = []
    where = placement.placement if placement is not None else None
    if where == HOST_RESIDENT:
        details[LABEL_NOTE] = "host-resident"
        what = {"bandwidth": "host-resident access over the link, not resident bandwidth",
                "first-touch": "host-resident access over the link, not a migration",
                "cpu-touch": "host-resident access by the CPU, not a migration"}[op]
        warnings.append(f"managed memory stayed in host memory (XNACK off): {what}; "
                        "HSA_XNACK=1 turns XNACK on where the GPU and its driver allow it")
    elif where == UNKNOWN:
        details[LABEL_NOTE] = "placement unknown"
        warnings.append("XNACK's state is not known: managed memory may have stayed in host "
                        "memory, and the figure has no peak")
    l2 = ctx.device.l2_cache_bytes
    if op == "bandwidth" and l2 and moved < 4 * l2:
        warnings.append(f"{moved / MIB:g} MiB moved per call is less than 4x the L2 cache "
                        f"({l2 / MIB:g} MiB): this may measure cache rather than memory")
    return CaseResult(timing=timing, rates=(Rate(figure_name(op), moved, "B/s", peak),),
                      details=details, warnings=tuple(warnings))


def figure_name(op: str) -> str:
    """The rate's name by how it counts bytes: the kernel's bytes read plus written are a
    bandwidth (as STREAM counts them); a touch's buffer, moved once, is a transfer rate."""
    return "bandwidth" if op == "bandwidth" else "transfer_rate"


BENCHMARK = Benchmark(
    name="unified-memory",
    family="micro",
    summary="GPU access to host and managed memory: zero-copy and resident (or, without "
            "XNACK on ROCm, host-resident) bandwidth, first touch from GPU and CPU, CPU-GPU "
            "hand-off latency",
    entry="accelbench.benchmarks.micro.unified:measure",
    params=(
        Param("op", "str", "bandwidth", choices=OPS,
              help="bandwidth of one GPU kernel; first-touch / cpu-touch of managed memory "
                   "by the GPU / the CPU after the other touched it; handoff: a CPU-GPU-CPU "
                   "round trip of one value"),
        Param("memory", "str", "host", choices=KINDS, only_when=("op", KIND_OPS),
              help="device memory, host memory (page-locked, mapped: zero-copy) or managed "
                   "memory (hipMallocManaged / cudaMallocManaged)"),
        Param("size_mib", "int", 256, minimum=1, only_when=("op", SIZED_OPS),
              help="size of one buffer in MiB"),
    ),
    devices=("cpu", "cuda"),
    timeout_s=300.0,
    sources=("accelbench.benchmarks.micro.gpu_runtime",
             "accelbench.benchmarks.micro.unified_buffers"),
    views=("accelbench.benchmarks.micro.view:sections",),
    typed=UnifiedParams,
)
