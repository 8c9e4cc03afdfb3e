"""PyTorch's CUDA calls faked on the CPU, for the GPU check's dry run.

The reference (gpu_reference.py) and the energy windows (gpu_energy.py) time plain
PyTorch with CUDA events, pinned host memory, streams and graphs. On a machine with no
GPU, `dry_torch()` gives them PyTorch itself with `torch.cuda` replaced: events read
`time.perf_counter`, synchronisation and streams do nothing, pinned memory is ordinary
memory, a captured graph replays nothing, and every device is the CPU. `dry_power()` is a
power source of a constant draw whose counter accumulates it. What comes out is the CPU's
figures: a dry run checks that the check runs, never what it measures.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from types import ModuleType, SimpleNamespace
from typing import Any

from gpu_energy import PowerSource

DEVICE_NAME = "dry run (CPU)"
DRY_WATTS = 100.0


class _Event:
    def __init__(self, enable_timing: bool = False) -> None:
        self._at = 0.0

    def record(self, stream: object = None) -> None:
        self._at = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: _Event) -> float:
        return (end._at - self._at) * 1e3  # ms, as CUDA events give it


class _Stream:
    def wait_stream(self, other: object) -> None:
        pass

    def synchronize(self) -> None:
        pass


class _Graph:
    def replay(self) -> None:
        pass


class _Cuda:
    Event = _Event
    Stream = _Stream
    CUDAGraph = _Graph

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def get_device_name(index: int = 0) -> str:
        return DEVICE_NAME

    @staticmethod
    def get_device_properties(index: int = 0) -> Any:
        return SimpleNamespace(name=DEVICE_NAME, uuid=None)

    @staticmethod
    def set_device(index: int) -> None:
        pass

    @staticmethod
    def synchronize(device: object = None) -> None:
        pass

    @staticmethod
    def empty_cache() -> None:
        pass

    @staticmethod
    def current_stream(device: object = None) -> _Stream:
        return _Stream()

    @staticmethod
    @contextlib.contextmanager
    def stream(stream: object) -> Iterator[None]:
        yield

    @staticmethod
    @contextlib.contextmanager
    def graph(graph: _Graph) -> Iterator[None]:
        yield  # what runs inside runs once, eagerly; the replay runs nothing


class DryTorch:
    """PyTorch, with `cuda` faked and every device the CPU."""

    def __init__(self, torch: ModuleType) -> None:
        self._torch = torch
        self.cuda = _Cuda()
        self.version = SimpleNamespace(hip=None, cuda=None, __version__=torch.__version__)
        self.__version__ = torch.__version__

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)

    def device(self, *args: Any) -> Any:
        return self._torch.device("cpu")

    def ones(self, *args: Any, pin_memory: bool = False, **kwargs: Any) -> Any:
        return self._torch.ones(*args, **kwargs)

    def empty(self, *args: Any, pin_memory: bool = False, **kwargs: Any) -> Any:
        return self._torch.empty(*args, **kwargs)


def dry_torch() -> DryTorch:
    import torch

    return DryTorch(torch)


def dry_power() -> PowerSource:
    """A constant draw of DRY_WATTS, its counter the draw times the time elapsed."""
    began = time.perf_counter()

    def energy() -> float:
        return DRY_WATTS * (time.perf_counter() - began)

    return PowerSource("dry run", energy, lambda: DRY_WATTS, lambda: DRY_WATTS, lambda: None)
