"""What each event is: compute, communication or memory traffic; a kernel launch or not.

Device activity follows the kernel names of the vendor libraries, as the
HolisticTraceAnalysis library does: NCCL and RCCL kernels (RCCL keeps NCCL's `nccl`
prefix) are communication; copies and fills are memory, whether the profiler records
them as `gpu_memcpy`/`gpu_memset` or, on ROCm, as the runtime's blit kernels
(`__amd_rocclr_copyBuffer`, `__amd_rocclr_fillBuffer`); every other kernel is compute.
"""

from __future__ import annotations

import re

COMPUTE = "compute"
COMMUNICATION = "communication"
MEMORY = "memory"
IDLE = "idle"
# An instant in which several kinds of work run counts once, for the first of these.
PRIORITY = (COMPUTE, COMMUNICATION, MEMORY)
PARTS = (*PRIORITY, IDLE)

_COMM_KERNEL = re.compile(r"^(void )?(nccl|rccl)", re.IGNORECASE)
_MEMORY_KERNEL = re.compile(
    r"^(hip)?memcpy|^(hip)?memset|^dma|^__amd_rocclr_(copy|fill)|^copy(host|device)to|"
    r"^fillbuffer",
    re.IGNORECASE,
)
_COMM_OP = re.compile(r"^(c10d::|gloo:|nccl:|rccl:)|record_param_comms|^c10d_")
_MEMORY_OP = re.compile(
    r"^aten::(copy_|_copy_from|_copy_from_and_resize|_to_copy|to|clone|contiguous|fill_|"
    r"zero_|_foreach_copy_)$"
)
# Runtime calls that put kernels on a stream (CUDA runtime and driver, HIP), a graph
# launch included: its kernels carry the launch's correlation id.
_LAUNCH = re.compile(r"^(cuda|cu|hip)\w*Launch\w*Kernel|^(cuda|cu|hip)GraphLaunch")


def device_category(cat: str, name: str) -> str:
    """Category of one device activity (`cat` is the trace's event category)."""
    if cat in ("gpu_memcpy", "gpu_memset"):
        return MEMORY
    if _COMM_KERNEL.match(name):
        return COMMUNICATION
    if _MEMORY_KERNEL.match(name):
        return MEMORY
    return COMPUTE


def cpu_op_category(name: str) -> str:
    """Category of a CPU operator's own time (its children excluded)."""
    if _COMM_OP.search(name):
        return COMMUNICATION
    if _MEMORY_OP.match(name):
        return MEMORY
    return COMPUTE


def is_kernel_launch(name: str) -> bool:
    return bool(_LAUNCH.match(name))


def platform_of(runtime_names: set[str]) -> str | None:
    """"rocm" or "cuda" from the runtime calls a trace recorded; None without any."""
    if any(n.startswith("hip") for n in runtime_names):
        return "rocm"
    if any(n.startswith("cu") for n in runtime_names):
        return "cuda"
    return None


def short_name(name: str, width: int = 70) -> str:
    """A kernel or operator name a person can read: no return type, template or
    parameter lists (`void at::native::f<4, ...>(int, ...)` -> `at::native::f`)."""
    text = name[5:] if name.startswith("void ") else name
    text = text.replace("(anonymous namespace)::", "")
    if not text.startswith(("Memcpy", "Memset", "[")):
        cut = min((i for i in (text.find("<"), text.find("(")) if i > 0), default=len(text))
        text = text[:cut]
    return text if len(text) <= width else text[: width - 1] + "…"
