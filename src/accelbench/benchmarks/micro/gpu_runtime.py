"""The GPU runtime library, HIP or CUDA, through ctypes: managed and mapped host memory.

PyTorch allocates device memory and page-locked host memory, but not managed memory
(hipMallocManaged / cudaMallocManaged), and its pinned host memory is not asked to be
mapped. Both come from the runtime library PyTorch itself runs on: libamdhip64 on ROCm
builds (ROCm wheels ship it in torch/lib), libcudart on CUDA builds (the nvidia CUDA
runtime wheel, or the system's). The library already loaded into this process is
preferred, so accelbench talks to the same runtime as PyTorch; otherwise it is looked for
next to torch, then where ROCm or CUDA installs it, then on the loader's path.

Every call is checked: a non-zero error code becomes RuntimeCallFailed with the
runtime's own name and text for it, never a crash. `Runtime` takes the library as an
object, so tests hand it a fake one.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANAGED_MEMORY = "managed_memory"  # the device can allocate managed memory here
CONCURRENT_MANAGED_ACCESS = "concurrent_managed_access"  # CPU and GPU at once, coherently
PAGEABLE_MEMORY_ACCESS = "pageable_memory_access"  # the GPU reads malloc'd memory
CAN_MAP_HOST_MEMORY = "can_map_host_memory"  # page-locked host memory mapped for the GPU
INTEGRATED = "integrated"  # shares memory with the host


@dataclass(frozen=True)
class Api:
    """The names and numbers of one runtime's API that accelbench uses."""

    platform: str  # "rocm" or "cuda", as DeviceInfo.platform says
    prefix: str  # "hip" or "cuda"
    library: str  # file name stem: "libamdhip64.so", "libcudart.so"
    find_name: str  # what ctypes.util.find_library is asked for
    install_dirs: tuple[tuple[str, str], ...]  # (environment variable, default folder)
    attributes: Mapping[str, tuple[str, int]]  # ours -> (the runtime's name, its number)
    host_alloc: tuple[str, ...]  # functions that allocate page-locked host memory
    host_mapped: int = 0x2  # hipHostMallocMapped, cudaHostAllocMapped
    attach_global: int = 0x1  # hipMemAttachGlobal, cudaMemAttachGlobal


# From hip_runtime_api.h (hipDeviceAttribute_t, hipHostMalloc flags).
HIP = Api(
    platform="rocm",
    prefix="hip",
    library="libamdhip64.so",
    find_name="amdhip64",
    install_dirs=(("ROCM_PATH", "/opt/rocm"),),
    attributes={
        MANAGED_MEMORY: ("hipDeviceAttributeManagedMemory", 24),
        CONCURRENT_MANAGED_ACCESS: ("hipDeviceAttributeConcurrentManagedAccess", 9),
        PAGEABLE_MEMORY_ACCESS: ("hipDeviceAttributePageableMemoryAccess", 65),
        CAN_MAP_HOST_MEMORY: ("hipDeviceAttributeCanMapHostMemory", 3),
        INTEGRATED: ("hipDeviceAttributeIntegrated", 16),
    },
    host_alloc=("hipHostMalloc", "hipHostAlloc"),
)

# From driver_types.h (cudaDeviceAttr, cudaHostAlloc flags).
CUDA = Api(
    platform="cuda",
    prefix="cuda",
    library="libcudart.so",
    find_name="cudart",
    install_dirs=(("CUDA_HOME", "/usr/local/cuda"), ("CUDA_PATH", "/usr/local/cuda")),
    attributes={
        MANAGED_MEMORY: ("cudaDevAttrManagedMemory", 83),
        CONCURRENT_MANAGED_ACCESS: ("cudaDevAttrConcurrentManagedAccess", 89),
        PAGEABLE_MEMORY_ACCESS: ("cudaDevAttrPageableMemoryAccess", 88),
        CAN_MAP_HOST_MEMORY: ("cudaDevAttrCanMapHostMemory", 19),
        INTEGRATED: ("cudaDevAttrIntegrated", 18),
    },
    host_alloc=("cudaHostAlloc",),
)

APIS = {"rocm": HIP, "cuda": CUDA}


class RuntimeUnavailable(Exception):
    """The runtime library, or a function of it, cannot be reached."""


class RuntimeCallFailed(Exception):
    """A runtime call returned an error code."""

    def __init__(self, function: str, code: int, text: str) -> None:
        super().__init__(f"{function} returned {code} ({text})" if text
                         else f"{function} returned {code}")
        self.function = function
        self.code = code


_VOID_PP = ctypes.POINTER(ctypes.c_void_p)
_INT_P = ctypes.POINTER(ctypes.c_int)
# Argument types of each function, by its name without the prefix.
_SIGNATURES: dict[str, list[Any]] = {
    "SetDevice": [ctypes.c_int],
    "DeviceGetAttribute": [_INT_P, ctypes.c_int, ctypes.c_int],
    "MallocManaged": [_VOID_PP, ctypes.c_size_t, ctypes.c_uint],
    "HostMalloc": [_VOID_PP, ctypes.c_size_t, ctypes.c_uint],
    "HostAlloc": [_VOID_PP, ctypes.c_size_t, ctypes.c_uint],
    "HostGetDevicePointer": [_VOID_PP, ctypes.c_void_p, ctypes.c_uint],
    "Free": [ctypes.c_void_p],
    "FreeHost": [ctypes.c_void_p],
    "HostFree": [ctypes.c_void_p],
    "RuntimeGetVersion": [_INT_P],
}


class Runtime:
    """One runtime library, its calls checked."""

    def __init__(self, api: Api, library: Any, path: str) -> None:
        self.api = api
        self.path = path  # where the library was found, for the record
        self._library = library
        self._bound: dict[str, Callable[..., int]] = {}

    def _function(self, name: str) -> Callable[..., int]:
        full = self.api.prefix + name
        if full not in self._bound:
            fn = getattr(self._library, full, None)
            if fn is None:
                raise RuntimeUnavailable(f"{self.path} has no function {full}")
            fn.restype = ctypes.c_int
            fn.argtypes = _SIGNATURES[name]
            self._bound[full] = fn
        return self._bound[full]

    def has(self, name: str) -> bool:
        return getattr(self._library, self.api.prefix + name, None) is not None

    def _call(self, name: str, *args: Any) -> None:
        code = int(self._function(name)(*args))
        if code != 0:
            raise RuntimeCallFailed(self.api.prefix + name, code, self.error_text(code))

    def error_text(self, code: int) -> str:
        """ "hipErrorOutOfMemory: out of memory", as the runtime names the code."""
        parts = []
        for name in ("GetErrorName", "GetErrorString"):
            fn = getattr(self._library, self.api.prefix + name, None)
            if fn is None:
                continue
            fn.restype = ctypes.c_char_p
            fn.argtypes = [ctypes.c_int]
            try:
                text = fn(code)
            except Exception:  # the text is a courtesy: the code is reported anyway
                continue
            if text:
                parts.append(text.decode(errors="replace") if isinstance(text, bytes)
                             else str(text))
        return ": ".join(parts)

    def version(self) -> int | None:
        out = ctypes.pointer(ctypes.c_int(0))
        try:
            self._call("RuntimeGetVersion", out)
        except (RuntimeUnavailable, RuntimeCallFailed):
            return None
        return int(out.contents.value)

    def set_device(self, index: int) -> None:
        self._call("SetDevice", index)

    def attribute(self, key: str, index: int) -> int:
        _, number = self.api.attributes[key]
        out = ctypes.pointer(ctypes.c_int(0))
        self._call("DeviceGetAttribute", out, number, index)
        return int(out.contents.value)

    def attribute_name(self, key: str) -> str:
        return self.api.attributes[key][0]

    def malloc_managed(self, nbytes: int) -> int:
        """Managed memory any stream of any device may reach (MemAttachGlobal)."""
        return self._allocate("MallocManaged", nbytes, self.api.attach_global)

    def host_alloc_name(self) -> str:
        """The function that allocates page-locked host memory here: hipHostMalloc, or
        hipHostAlloc where a HIP runtime no longer has it; cudaHostAlloc."""
        return next((n for n in self.api.host_alloc if self.has(n[len(self.api.prefix):])),
                    self.api.host_alloc[0])

    def malloc_host_mapped(self, nbytes: int) -> int:
        """Page-locked host memory mapped into the device's address space."""
        name = self.host_alloc_name()[len(self.api.prefix):]
        return self._allocate(name, nbytes, self.api.host_mapped)

    def host_device_pointer(self, host: int) -> int:
        """Where the device sees mapped host memory (the same address under unified
        addressing, which every 64-bit ROCm and CUDA system has)."""
        out = ctypes.pointer(ctypes.c_void_p())
        self._call("HostGetDevicePointer", out, host, 0)
        if not out.contents.value:
            raise RuntimeCallFailed(self.api.prefix + "HostGetDevicePointer", 0,
                                    "returned no device pointer")
        return int(out.contents.value)

    def free(self, pointer: int) -> None:
        self._call("Free", pointer)

    def free_host(self, pointer: int) -> None:
        self._call("HostFree" if self.api.prefix == "hip" else "FreeHost", pointer)

    def _allocate(self, name: str, nbytes: int, flags: int) -> int:
        out = ctypes.pointer(ctypes.c_void_p())
        self._call(name, out, nbytes, flags)
        if not out.contents.value:
            raise RuntimeCallFailed(self.api.prefix + name, 0, "returned a null pointer")
        return int(out.contents.value)


def find_library(api: Api, maps: str = "/proc/self/maps",
                 environ: Mapping[str, str] | None = None) -> str | None:
    """The path (or loader name) of the runtime library to open; None if there is none.

    In order: the library already loaded into this process (PyTorch's own), a copy next
    to torch (ROCm wheels keep libamdhip64 in torch/lib; CUDA wheels depend on the
    nvidia runtime wheel, in site-packages/nvidia/*/lib), the ROCm or CUDA installation
    (ROCM_PATH, CUDA_HOME, CUDA_PATH, or their default folders), then the loader's own
    search (ctypes.util.find_library)."""
    environ = os.environ if environ is None else environ
    loaded = _loaded(api.library, maps)
    if loaded:
        return loaded
    for folder in [*_torch_dirs(), *_install_dirs(api, environ)]:
        found = sorted(glob.glob(os.path.join(folder, api.library + "*")))
        if found:
            return found[0]
    return ctypes.util.find_library(api.find_name)


def _loaded(library: str, maps: str) -> str | None:
    try:
        with open(maps, encoding="utf-8", errors="replace") as f:
            for line in f:
                path = line.split()[-1] if line.strip() else ""
                if os.path.basename(path).startswith(library):
                    return path
    except OSError:
        pass
    return None


def _torch_dirs() -> list[str]:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return []
    torch_dir = Path(spec.origin).parent
    nvidia = sorted(str(p) for p in (torch_dir.parent / "nvidia").glob("*/lib"))
    return [str(torch_dir / "lib"), *nvidia]


def _install_dirs(api: Api, environ: Mapping[str, str]) -> Iterable[str]:
    for variable, default in api.install_dirs:
        root = environ.get(variable) or default
        yield from (os.path.join(root, "lib"), os.path.join(root, "lib64"))


def open_runtime(platform: str, library: Any = None, path: str | None = None) -> Runtime:
    """The runtime of `platform` ("rocm" or "cuda"); RuntimeUnavailable with the reason
    when there is none. `library` is an already opened library (tests pass a fake)."""
    api = APIS.get(platform)
    if api is None:
        raise RuntimeUnavailable(f"no GPU runtime library for the {platform} platform")
    if library is not None:
        return Runtime(api, library, path or api.library)
    found = path or find_library(api)
    if found is None:
        raise RuntimeUnavailable(
            f"{api.library} was not found (not loaded by PyTorch, not next to torch, not "
            f"under {', '.join(v for v, _ in api.install_dirs)} and not on the loader's path)")
    try:
        return Runtime(api, ctypes.CDLL(found), found)
    except OSError as exc:
        raise RuntimeUnavailable(f"{found} could not be loaded: {exc}") from None
