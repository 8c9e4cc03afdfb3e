"""Peer access between two GPUs, turned off for a while: the copy matrix's "peer off"
paths time `copy_` between GPUs as a process without peer access gets it (the driver
stages the bytes through host memory), beside the same copy with peer access on.

PyTorch turns peer access on by itself, where the driver allows it, the first time it
copies between two GPUs, and has no call to turn it off; the runtime it is linked to
(libcudart, or libamdhip64 under ROCm) has: cudaDeviceDisablePeerAccess /
hipDeviceDisablePeerAccess, called with the accessing device current. `PeerAccessOff`
turns it off both ways, and on again afterwards, whatever happened in between, so
PyTorch's own record of the pair (peer access on) is true again when it next copies.
Only copies the driver can stage (plain memcpys) may run while it is off: a copy kernel
that reads the peer's memory would fault.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

# The runtime's return codes that mean "already so", per platform: (not enabled,
# already enabled). CUDA: cudaErrorPeerAccessNotEnabled 705, ...AlreadyEnabled 704;
# HIP: hipErrorPeerAccessNotEnabled 705, ...AlreadyEnabled 704.
SUCCESS = 0
NOT_ENABLED, ALREADY_ENABLED = 705, 704
_LIBRARIES = {"cuda": ("libcudart.so", "cuda"), "rocm": ("libamdhip64.so", "hip")}


class PeerAccessError(RuntimeError):
    pass


def runtime_path(platform: str, maps: Iterable[str] | None = None) -> str | None:
    """The path of the GPU runtime library this process loaded (from /proc/self/maps)."""
    wanted = _LIBRARIES[platform][0]
    if maps is None:
        try:
            maps = Path("/proc/self/maps").read_text().splitlines()
        except OSError:
            return None
    for line in maps:
        path = line.split(None, 5)[-1] if line.count(" ") >= 5 else ""
        if Path(path).name.startswith(wanted):
            return path
    return None


class PeerAccessOff:
    """`with PeerAccessOff(torch, runtime, prefix, a, b):` GPUs a and b without peer
    access to each other; `runtime` is the loaded runtime library (`open_runtime`)."""

    def __init__(self, torch: ModuleType, runtime: Any, prefix: str, a: int, b: int) -> None:
        self._torch = torch
        self._disable: Callable[[int], int] = getattr(runtime, f"{prefix}DeviceDisablePeerAccess")
        self._enable: Callable[[int, int], int] = getattr(runtime,
                                                          f"{prefix}DeviceEnablePeerAccess")
        self._pairs = ((a, b), (b, a))
        self._was_on: list[tuple[int, int]] = []

    def __enter__(self) -> PeerAccessOff:
        try:
            for device, peer in self._pairs:
                with self._torch.cuda.device(device):
                    code = self._disable(peer)
                if code == SUCCESS:
                    self._was_on.append((device, peer))
                elif code != NOT_ENABLED:
                    raise PeerAccessError(f"turning peer access off from gpu{device} to "
                                          f"gpu{peer} failed (runtime error {code})")
        except BaseException:
            self._restore()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._restore()

    def _restore(self) -> None:
        failed = []
        for device, peer in self._was_on:
            with self._torch.cuda.device(device):
                code = self._enable(peer, 0)
            if code not in (SUCCESS, ALREADY_ENABLED):
                failed.append(f"gpu{device} to gpu{peer} (runtime error {code})")
        self._was_on = []
        if failed:
            raise PeerAccessError("turning peer access on again failed: " + ", ".join(failed))


def open_runtime(platform: str) -> tuple[Any, str] | None:
    """(the runtime library, its functions' prefix) this process's PyTorch uses; None
    where it is not loaded as a library of its own (a build that links it statically)."""
    if platform not in _LIBRARIES:
        return None
    path = runtime_path(platform)
    if path is None:
        return None
    library = ctypes.CDLL(path)
    prefix = _LIBRARIES[platform][1]
    for name in (f"{prefix}DeviceDisablePeerAccess", f"{prefix}DeviceEnablePeerAccess"):
        getattr(library, name).restype = ctypes.c_int
    return library, prefix
