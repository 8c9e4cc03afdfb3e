"""Where telemetry comes from, and picking the sources that exist for a device.

A source is anything with a `name`, a `read()` that returns one reading of its channels
(None for a channel it could not read this time) and a `close()`. A source may also
offer, read by the sampler when present: `wrap_j` (counter channel -> wrap value in J),
`throttle_names` (THROTTLE bit -> name), `channel_sources` (channel -> the name to
credit, such as "rapl" for the host's CPU energy) and `shared_by` (channel -> the devices
whose package that channel reads: the GCDs of an MI250, the partitions of a GPU, the MIG
instances of an NVIDIA GPU, and the CPU cores of an APU such as the MI300A).

Which device. NVML and amdsmi number every device of the node in their own order (NVML by
PCI address); PyTorch numbers the visible ones, in the order the runtime chose. So
`vendor_index` finds PyTorch's device in the vendor library by the PCI address PyTorch
reports for it (pci_domain_id, pci_bus_id, pci_device_id), and on NVIDIA by its UUID
where the address finds none. That holds under CUDA_VISIBLE_DEVICES=GPU-<uuid>, a
reordered list, CUDA's default fastest-first order, and MIG (whose instance is on its
GPU's address: the GPU is read, its power marked as shared). Counting through the
*_VISIBLE_DEVICES variables is the fallback, where torch or the library cannot say, and
uses each vendor's variables only: CUDA_VISIBLE_DEVICES on NVIDIA; ROCR_VISIBLE_DEVICES,
then HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES, which HIP also reads) on AMD. That
count assumes the runtime orders devices as the library does (CUDA_DEVICE_ORDER=PCI_BUS_ID
on NVIDIA), and UUIDs in the variables leave it nothing to count. Compute partitions of
an MI300-class GPU share one PCI device, so the address finds several there and the count
decides among them.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from accelbench.core.untrusted import is_decimal
from accelbench.env.bindings import quietly
from accelbench.env.host.readings import PathLike
from accelbench.env.telemetry.amd import (
    CLI_TIMEOUT_S,
    AmdSmiCliSource,
    AmdSmiSource,
    CliRunner,
    pci_device,
    run_cli,
)
from accelbench.env.telemetry.guard import Importer, SourceUnavailable, load_binding
from accelbench.env.telemetry.host import HostSource
from accelbench.env.telemetry.nvidia import NvmlSource

__all__ = [
    "SOURCE_NAMES",
    "AmdSmiCliSource",
    "AmdSmiSource",
    "DeviceAddress",
    "HostSource",
    "NvmlSource",
    "Source",
    "SourceUnavailable",
    "open_sources",
]

SOURCE_NAMES = ("amdsmi", "amd-smi", "nvml", "host")


class Source(Protocol):
    name: str

    def read(self) -> dict[str, float | None]: ...

    def close(self) -> None: ...


def _answers(source: Source) -> bool:
    """One reading with anything in it; a source that raises or says nothing is closed."""
    try:
        reading = source.read()
    except Exception:
        reading = {}
    if any(value is not None for value in reading.values()):
        return True
    with contextlib.suppress(Exception):
        source.close()
    return False


NVIDIA, AMD = "nvidia", "amd"


@dataclass(frozen=True)
class DeviceAddress:
    """What PyTorch reports of where a device is: its PCI (domain, bus, device) and UUID."""

    pci: tuple[int, int, int] | None = None
    uuid: str | None = None

    @classmethod
    def of(cls, properties: object) -> DeviceAddress:
        """From torch.cuda.get_device_properties(i); fields it lacks are None."""
        domain, bus, device = (getattr(properties, name, None)
                               for name in ("pci_domain_id", "pci_bus_id", "pci_device_id"))
        pci = None
        if isinstance(domain, int) and isinstance(bus, int) and isinstance(device, int):
            pci = (domain, bus, device)
        uuid = getattr(properties, "uuid", None)
        text = str(uuid).strip() if uuid is not None else ""
        return cls(pci=pci, uuid=text or None)


def vendor_index(torch_index: int | None, environ: Mapping[str, str] | None = None, *,
                 vendor: str | None = None, address: DeviceAddress | None = None,
                 importer: Importer = importlib.import_module) -> int | None:
    """The vendor library's index of PyTorch's device `torch_index`: found by its PCI
    address or UUID (see the module's docstring), else counted through the vendor's
    *_VISIBLE_DEVICES. `vendor` ("nvidia", "amd") and `address` default to what PyTorch
    says of the device; without a device PyTorch can see, only the count is left."""
    if torch_index is None:
        return None
    if vendor is None and address is None:
        vendor, address = _torch_device(torch_index)
    if vendor is not None and address is not None:
        found = _library_index(vendor, address, importer)
        if found is not None:
            return found
    env = os.environ if environ is None else environ
    return visible_index(torch_index, env, vendor)


def visible_index(torch_index: int, env: Mapping[str, str], vendor: str | None) -> int:
    """The library's index of visible device `torch_index` by counting through the vendor's
    *_VISIBLE_DEVICES (both vendors' where it is not known); unchanged where they are not
    set or hold UUIDs."""
    # ROCm applies ROCR_VISIBLE_DEVICES first, then HIP_VISIBLE_DEVICES (or, where that is
    # not set, CUDA_VISIBLE_DEVICES) to what is left; CUDA reads CUDA_VISIBLE_DEVICES.
    if vendor == NVIDIA:
        layers = [env.get("CUDA_VISIBLE_DEVICES")]
    else:
        layers = [env.get("ROCR_VISIBLE_DEVICES"),
                  env.get("HIP_VISIBLE_DEVICES") or env.get("CUDA_VISIBLE_DEVICES")]
    visible: list[int] | None = None  # None: every device, in the library's order
    for value in layers:
        if not value:
            continue
        items = [item.strip() for item in value.split(",")]
        if not all(is_decimal(item) for item in items):
            return torch_index  # UUIDs: no index arithmetic can say which device
        chosen = [int(item) for item in items]
        visible = chosen if visible is None else [visible[i] for i in chosen
                                                  if i < len(visible)]
    if visible is None or torch_index >= len(visible):
        return torch_index
    return visible[torch_index]


def _torch_device(torch_index: int) -> tuple[str | None, DeviceAddress | None]:
    """(vendor, address) of PyTorch's device, or (None, None) where PyTorch has none."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None, None
        properties = torch.cuda.get_device_properties(torch_index)
        return (AMD if torch.version.hip else NVIDIA), DeviceAddress.of(properties)
    except Exception:  # telemetry is advisory: no address, and the count decides
        return None, None


# Found indices, per (vendor, address), for the real libraries: a process's devices do
# not move, and starting a vendor library for every case would cost its start-up each time.
_FOUND: dict[tuple[str, DeviceAddress], int | None] = {}


def _library_index(vendor: str, address: DeviceAddress, importer: Importer) -> int | None:
    key = (vendor, address)
    cached = importer is importlib.import_module
    if cached and key in _FOUND:
        return _FOUND[key]
    try:
        found = (_nvml_index if vendor == NVIDIA else _amdsmi_index)(address, importer)
    except Exception:  # a library that is absent or fails: the count decides
        found = None
    if cached:
        _FOUND[key] = found
    return found


def _nvml_index(address: DeviceAddress, importer: Importer) -> int | None:
    nvml = load_binding("pynvml", importer)
    quietly(nvml.nvmlInit)
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        if address.pci is not None:
            for i, handle in enumerate(handles):
                info = nvml.nvmlDeviceGetPciInfo(handle)
                if (info.domain, info.bus, info.device) == address.pci:
                    return i
        if address.uuid is not None:
            wanted = _bare_uuid(address.uuid)
            for i, handle in enumerate(handles):
                if _bare_uuid(nvml.nvmlDeviceGetUUID(handle)) == wanted:
                    return i
        return None
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def _amdsmi_index(address: DeviceAddress, importer: Importer) -> int | None:
    if address.pci is None:
        return None
    lib = load_binding("amdsmi", importer)
    quietly(lib.amdsmi_init)
    try:
        handles = lib.amdsmi_get_processor_handles()
        matches = [i for i, handle in enumerate(handles)
                   if pci_device(lib.amdsmi_get_gpu_device_bdf(handle)) == address.pci]
        return matches[0] if len(matches) == 1 else None  # partitions: the count decides
    finally:
        with contextlib.suppress(Exception):
            lib.amdsmi_shut_down()


def _bare_uuid(value: Any) -> str:
    text = value.decode() if isinstance(value, bytes) else str(value)
    return text.strip().lower().removeprefix("gpu-")


def open_sources(
    device_type: str,
    device_index: int | None,
    *,
    include: Collection[str] | None = None,
    importer: Importer = importlib.import_module,
    runner: CliRunner = run_cli,
    cli_timeout_s: float = CLI_TIMEOUT_S,
    sysfs: PathLike = "/sys",
    procfs: PathLike = "/proc",
) -> tuple[list[Source], dict[str, str]]:
    """The sources that answer for this device, and why each other one is not used.

    A "cuda" device may be NVIDIA or AMD (ROCm builds of torch call HIP devices "cuda"),
    so NVML is tried, then amdsmi, and the first that answers for `device_index` is kept;
    the amd-smi CLI stands in when neither does. `device_index` is the vendor library's
    index. The host is always included unless `include` leaves it out.
    """
    wanted = set(SOURCE_NAMES if include is None else include)
    unknown = wanted - set(SOURCE_NAMES)
    if unknown:
        raise ValueError(
            f"unknown telemetry source(s) {', '.join(sorted(unknown))}; "
            f"choose from {', '.join(SOURCE_NAMES)}"
        )
    sources: list[Source] = []
    missing: dict[str, str] = {}
    device = device_type.split(":", 1)[0]
    vendors = [name for name in ("nvml", "amdsmi", "amd-smi") if name in wanted]
    if device != "cuda" or device_index is None:
        for name in vendors:
            missing[name] = f"not used for a {device_type!r} device"
    else:
        index = device_index
        openers: dict[str, Callable[[], Source]] = {
            "nvml": lambda: NvmlSource.open(index, importer=importer),
            "amdsmi": lambda: AmdSmiSource.open(index, importer=importer),
            "amd-smi": lambda: AmdSmiCliSource.open(index, runner=runner,
                                                    timeout_s=cli_timeout_s),
        }
        answered: str | None = None
        for name in vendors:
            if answered is not None:
                missing[name] = f"not needed: {answered} answers for device {index}"
                continue
            try:
                source = openers[name]()
            except SourceUnavailable as exc:
                missing[name] = str(exc)
                continue
            except Exception as exc:  # a library failing its own way costs only itself
                missing[name] = f"could not open: {type(exc).__name__}: {exc}".splitlines()[0]
                continue
            if _answers(source):
                sources.append(source)
                answered = name
            else:
                missing[name] = f"{name} gave no reading for device {index}"
    if "host" in wanted:
        host = HostSource(sysfs=sysfs, procfs=procfs)
        missing.update(host.missing)
        sources.append(host)
    return sources, missing
