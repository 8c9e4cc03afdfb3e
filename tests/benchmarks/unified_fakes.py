"""Fakes for the unified-memory tests: a GPU runtime library (HIP or CUDA) that hands out
real host memory the CPU can address, records every call and fails where told to; and the
device properties PyTorch would give (gcnArchName with its XNACK feature, is_integrated)."""

from __future__ import annotations

import ctypes
from typing import Any

from accelbench.benchmarks.micro.gpu_runtime import APIS, Runtime

# Attribute numbers of the managed-memory and mapped-host-memory switches, per prefix.
_SUPPORT = {"hip": (24, 3), "cuda": (83, 19)}


class FakeLibrary:
    """Answers as libamdhip64 or libcudart would, with `attributes` (by number) for
    hipDeviceGetAttribute / cudaDeviceGetAttribute and `fail` ({function: code})."""

    def __init__(self, prefix: str, attributes: dict[int, int] | None = None,
                 fail: dict[str, int] | None = None, host_alloc: str | None = None) -> None:
        self.prefix = prefix
        managed, mapped = _SUPPORT[prefix]
        self.attributes = {managed: 1, mapped: 1, **(attributes or {})}
        self.fail = fail or {}
        self.calls: list[tuple[Any, ...]] = []
        self.memory: dict[int, Any] = {}  # address -> the buffer that backs it
        self.freed: list[tuple[str, int]] = []
        names = {
            "SetDevice": self._set_device,
            "DeviceGetAttribute": self._attribute,
            "MallocManaged": self._malloc,
            "HostGetDevicePointer": self._device_pointer,
            "Free": self._free("Free"),
            "RuntimeGetVersion": self._version,
            "GetErrorName": lambda code: f"{prefix}Error{code}".encode(),
            "GetErrorString": lambda code: b"a fake error",
        }
        names[host_alloc or ("HostMalloc" if prefix == "hip" else "HostAlloc")] = self._malloc
        names["HostFree" if prefix == "hip" else "FreeHost"] = self._free("FreeHost")
        for name, fn in names.items():
            setattr(self, prefix + name, self._recorded(prefix + name, fn))

    def _recorded(self, name: str, fn: Any) -> Any:
        def call(*args: Any) -> Any:
            self.calls.append((name, *args))
            if name in self.fail:
                return self.fail[name]
            return fn(*args)

        return call

    def _set_device(self, index: int) -> int:
        return 0

    def _attribute(self, out: Any, number: int, index: int) -> int:
        out.contents.value = self.attributes.get(number, 0)
        return 0

    def _malloc(self, out: Any, size: int, flags: int) -> int:
        backing = ctypes.create_string_buffer(size)
        out.contents.value = ctypes.addressof(backing)
        self.memory[ctypes.addressof(backing)] = backing
        return 0

    def _device_pointer(self, out: Any, host: int, flags: int) -> int:
        out.contents.value = host  # unified addressing: the same address
        return 0

    def _free(self, how: str) -> Any:
        def free(pointer: int) -> int:
            self.freed.append((how, pointer))
            return 0

        return free

    def _version(self, out: Any) -> int:
        out.contents.value = 60342131
        return 0

    def allocations(self) -> list[tuple[str, int, int]]:
        """(function, bytes, flags) of every allocation asked for."""
        return [(c[0], c[2], c[3]) for c in self.calls
                if c[0].endswith(("MallocManaged", "HostMalloc", "HostAlloc"))]


def fake_runtime(platform: str, **kwargs: Any) -> tuple[Runtime, FakeLibrary]:
    api = APIS[platform]
    library = FakeLibrary(api.prefix, **kwargs)
    return Runtime(api, library, f"/fake/{api.library}"), library
