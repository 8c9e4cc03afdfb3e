"""Enough of PyTorch's GPU surface, on the CPU, to run the copy paths without a GPU.

Tensors say which device they are on and keep their bytes in CPU tensors. Each device has a
current stream (its default stream until `torch.cuda.stream` says otherwise), and every copy
is recorded with the streams PyTorch would run it on: the copy on the current stream of its
source GPU (of its GPU, to or from the host), and, between two GPUs, a barrier with the
current stream of the destination GPU before and after it (aten/src/ATen/native/cuda/Copy.cu,
copy_device_to_device and copy_kernel_cuda). `pin_memory()` goes through a caching allocator
that hands a freed block of the same size back, as PyTorch's caching host allocator does
(aten/src/ATen/core/CachingHostAllocator.h). The host's NUMA nodes place a page on the node
whose CPUs write it first (the kernel's default local policy), or on the home node where that
node is full; `page_nodes` answers where a buffer's pages are, as move_pages would.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch as real


@dataclass(frozen=True)
class Device:
    type: str  # "cpu", "cuda"
    index: int | None = None


CPU = Device("cpu")


def device_of(spec: object) -> Device:
    """A device from what the code passes: "cpu", "cuda:1", an index, a Device."""
    if isinstance(spec, Device):
        return spec
    if isinstance(spec, int):
        return Device("cuda", spec)
    kind, _, index = str(spec).partition(":")
    return Device(kind, int(index) if index else None)


@dataclass(eq=False)
class FakeStream:
    device: Device
    default: bool = False
    waited: list[FakeStream] = field(default_factory=list)  # streams this one waited for

    def wait_stream(self, other: FakeStream) -> None:
        self.waited.append(other)


@dataclass(frozen=True)
class Copy:
    target: Device
    source: Device
    stream: FakeStream | None  # the stream the copy runs on (None: within the host)
    barrier: FakeStream | None  # between two GPUs: the destination's current stream
    # Each host buffer it wrote (first) or read: (address, NUMA node of its pages).
    host: tuple[tuple[int, int | None], ...]

    @property
    def pair(self) -> tuple[int, int]:
        """(source GPU, destination GPU) of a copy between two GPUs."""
        assert self.source.index is not None and self.target.index is not None
        return self.source.index, self.target.index


class Nodes:
    """The host's NUMA nodes: where each buffer's pages went, and what was asked of it."""

    def __init__(self, cpus: Mapping[int, Sequence[int]], home: int = 0,
                 full: Sequence[int] = ()) -> None:
        self.cpus = cpus
        self.home = home  # the node of the CPUs the process runs on when not pinned
        self.full = set(full)  # nodes with no free page: their CPUs' pages go home
        self.current = home
        self.placed: dict[int, int | None] = {}  # address -> node (None: no page yet)
        self.asked: list[int] = []  # the addresses page_nodes was asked about

    @contextlib.contextmanager
    def pinned(self, cpus: Sequence[int]) -> Iterator[None]:
        [node] = [n for n, own in self.cpus.items() if tuple(own) == tuple(cpus)]
        before, self.current = self.current, node
        try:
            yield
        finally:
            self.current = before

    def fresh(self, address: int) -> None:
        self.placed[address] = None

    def write(self, address: int) -> None:
        if self.placed.get(address) is None:
            self.placed[address] = self.home if self.current in self.full else self.current

    def page_nodes(self, address: int, length: int, samples: int = 64) -> list[int] | None:
        self.asked.append(address)
        node = self.placed.get(address)
        return None if node is None else [node]


class Tensor:
    """A tensor on a (fake) device; `made` says whether creating it wrote its memory (an
    op's output), left it untouched (a fresh mapping) or kept it as it was (a reused
    pinned block)."""

    def __init__(self, torch: FakeTorch, data: real.Tensor, device: Device,
                 made: str = "written") -> None:
        self.torch, self.data, self.device = torch, data, device
        if device.type == "cpu" and made != "kept":
            torch.nodes.fresh(data.data_ptr())
            if made == "written":
                torch.nodes.write(data.data_ptr())

    def data_ptr(self) -> int:
        return int(self.data.data_ptr())

    def numel(self) -> int:
        return int(self.data.numel())

    def element_size(self) -> int:
        return int(self.data.element_size())

    def __mod__(self, other: int) -> Tensor:
        return Tensor(self.torch, self.data % other, self.device)

    def __ne__(self, other: object) -> Any:
        assert isinstance(other, Tensor) and other.device == self.device
        return self.data != other.data

    def to(self, where: Any, non_blocking: bool = False) -> Tensor:
        if isinstance(where, real.dtype):
            return Tensor(self.torch, self.data.to(where), self.device)
        return Tensor(self.torch, self.data.clone(), device_of(where))

    def contiguous(self) -> Tensor:
        return self

    def zero_(self) -> Tensor:
        self._written()
        self.data.zero_()
        return self

    def copy_(self, src: Tensor, non_blocking: bool = False) -> Tensor:
        self._written()
        self.torch.cuda.record(self, src)
        self.data.copy_(src.data)
        return self

    def pin_memory(self) -> Tensor:
        return self.torch.pinned_copy(self)

    def _written(self) -> None:
        if self.device.type == "cpu":
            self.torch.nodes.write(self.data_ptr())


class FakeCuda:
    """torch.cuda: devices, streams, copies recorded, and the runtime's host registration
    (torch.cuda.cudart())."""

    def __init__(self, torch: FakeTorch, gpus: int) -> None:
        self._torch = torch
        self._gpus = gpus
        self.defaults = {i: FakeStream(Device("cuda", i), default=True) for i in range(gpus)}
        self.current = dict(self.defaults)
        self.device = 0
        self.copies: list[Copy] = []
        self.registered: set[int] = set()

    def device_count(self) -> int:
        return self._gpus

    def can_device_access_peer(self, a: int, b: int) -> bool:
        return False

    def get_device_properties(self, index: int) -> object:
        return object()  # no PCI address: no PCIe link to rate against

    def Stream(self, device: object = None) -> FakeStream:
        return FakeStream(Device("cuda", self._index(device)))

    def current_stream(self, device: object = None) -> FakeStream:
        return self.current[self._index(device)]

    @contextlib.contextmanager
    def stream(self, stream: FakeStream) -> Iterator[None]:
        index = self._index(stream.device)
        before, device = self.current[index], self.device
        self.current[index], self.device = stream, index
        try:
            yield
        finally:
            self.current[index], self.device = before, device

    def synchronize(self, device: object = None) -> None:
        pass

    def cudart(self) -> FakeCuda:
        return self

    def cudaHostRegister(self, address: int, size: int, flags: int) -> int:
        self.registered.add(address)
        return 0

    def cudaHostUnregister(self, address: int) -> int:
        self.registered.remove(address)
        return 0

    def check_error(self, code: int) -> None:
        if code != 0:
            raise RuntimeError(f"runtime error {code}")

    def record(self, dst: Tensor, src: Tensor) -> None:
        gpus = [t.device for t in (src, dst) if t.device.type == "cuda"]
        stream = self.current[gpus[0].index or 0] if gpus else None
        barrier = None
        if len(gpus) == 2 and gpus[0] != gpus[1]:
            barrier = self.current[gpus[1].index or 0]
        host = tuple((t.data_ptr(), self._torch.nodes.placed.get(t.data_ptr()))
                     for t in (dst, src) if t.device.type == "cpu")
        self.copies.append(Copy(dst.device, src.device, stream, barrier, host))

    def _index(self, device: object) -> int:
        if device is None:
            return self.device
        found = device_of(device)
        return self.device if found.index is None else found.index


def installed(monkeypatch: Any, gpus: int, cpus: Mapping[int, Sequence[int]],
              full: Sequence[int] = ()) -> Any:
    """A FakeTorch with `gpus` GPUs on a host whose NUMA nodes have these CPUs (nodes in
    `full` have no free page), the host's pinning and page lookup (numa_place) faked.
    Typed Any: it is handed to the copy paths in the torch module's place."""
    from accelbench.benchmarks.health import numa_place

    nodes = Nodes(cpus, full=full)
    monkeypatch.setattr(numa_place, "pinned", nodes.pinned)
    monkeypatch.setattr(numa_place, "page_nodes", nodes.page_nodes)
    return FakeTorch(gpus, nodes)


class FakeTorch:
    """The `torch` the copy paths are handed."""

    int64, int32, uint8 = real.int64, real.int32, real.uint8

    def __init__(self, gpus: int, nodes: Nodes) -> None:
        self.nodes = nodes
        self.cuda = FakeCuda(self, gpus)
        self.free_pinned: dict[int, list[real.Tensor]] = {}  # the caching allocator's

    def arange(self, n: int, dtype: Any = None, device: object = "cpu") -> Tensor:
        return Tensor(self, real.arange(n, dtype=dtype), device_of(device))

    def zeros(self, *shape: int, dtype: Any = None, device: object = "cpu") -> Tensor:
        return Tensor(self, real.zeros(*shape, dtype=dtype), device_of(device))

    def frombuffer(self, buffer: Any, dtype: Any) -> Tensor:
        return Tensor(self, real.frombuffer(buffer, dtype=dtype), CPU, made="fresh")

    def get_num_threads(self) -> int:
        return real.get_num_threads()

    def set_num_threads(self, n: int) -> None:
        real.set_num_threads(n)

    def pinned_copy(self, tensor: Tensor) -> Tensor:
        """`tensor.pin_memory()`: a block from the cache where one of the size is free
        (its pages where they were first placed), else a new one, whose pages the
        runtime faults in as it pins them (on the node of the CPUs running now)."""
        free = self.free_pinned.setdefault(tensor.numel(), [])
        if free:
            block, made = free.pop(), "kept"
        else:
            block, made = real.empty(tensor.numel(), dtype=tensor.data.dtype), "written"
        block.copy_(tensor.data)
        out = Tensor(self, block, CPU, made=made)
        weakref.finalize(out, free.append, block)  # freed: back to the cache
        return out
