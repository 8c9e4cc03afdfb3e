"""Which physical GPUs a run's devices are: each visible device's UUID, board serial, PCI
address and product name, kept in the fingerprint ("gpus") so that a GPU's results stay
its own when it moves to another node (store: the per-run `run_gpus` table).

PyTorch numbers the visible devices (CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES and
ROCR_VISIBLE_DEVICES hide and reorder them); NVML and amdsmi number every device of the
node. A PyTorch device is found in the vendor library by the PCI address PyTorch reports
for it, then (NVIDIA) by its UUID, as telemetry finds it (env.telemetry.sources); where
PyTorch reports neither, by counting through the visible-device variables, and the
entry says so ("matched_by": "order"). Devices that share one PCI device (compute
partitions) are told apart by that count too.

The key a GPU's history is kept under is its board serial; where several devices of the
node share one serial (the two GCDs of an MI250X, the partitions of an MI300X) the UUID,
which is each device's own; else the serial with the device's place among those that
share it, by PCI address. A device with neither serial nor UUID has no key.

Nothing here may fail a run: a library that is missing, does not start or does not
answer a call leaves those fields None (the device's PyTorch address and name remain).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.env.bindings import quietly
from accelbench.env.pcie import sysfs_address
from accelbench.env.telemetry.amd import pci_device
from accelbench.env.telemetry.guard import Importer, load_binding
from accelbench.env.telemetry.sources import AMD, NVIDIA, DeviceAddress, visible_index

# The fields of each entry of the fingerprint's "gpus" list.
FIELDS = ("index", "key", "uuid", "serial", "bus_id", "product", "matched_by")
# Longest text kept of a field: a library's answer is not trusted to be short.
MAX_TEXT = 128
_NO_VALUE = {"", "n/a", "na", "none", "unknown", "not supported", "[n/a]", "0000:00:00.0"}


@dataclass(frozen=True)
class LibraryDevice:
    """One device as the vendor library lists it."""

    pci: tuple[int, int, int] | None = None
    bus_id: str | None = None
    uuid: str | None = None
    serial: str | None = None
    product: str | None = None


def read_identities(torch: object, platform: str, environ: Mapping[str, str], *,
                    importer: Importer = importlib.import_module) -> list[dict[str, Any]]:
    """One entry per device PyTorch sees on a "cuda" or "rocm" platform (else none), in
    PyTorch's order; never raises."""
    if platform not in ("cuda", "rocm"):
        return []
    try:
        count = int(torch.cuda.device_count())  # type: ignore[attr-defined]
    except Exception:
        return []
    vendor = AMD if platform == "rocm" else NVIDIA
    listed = library_devices(vendor, importer)
    return identities(torch, count, vendor, listed, environ)


def identities(torch: object, count: int, vendor: str, listed: Sequence[LibraryDevice],
               environ: Mapping[str, str]) -> list[dict[str, Any]]:
    """The entries of PyTorch's `count` devices, matched to the library's `listed`."""
    out = []
    for index in range(count):
        try:
            props = torch.cuda.get_device_properties(index)  # type: ignore[attr-defined]
        except Exception:
            props = None
        address = DeviceAddress.of(props)
        found, how = _match(index, address, vendor, listed, environ)
        torch_uuid = _torch_uuid(address.uuid, vendor)
        out.append({
            "index": index,
            "uuid": found.uuid if found and found.uuid else torch_uuid,
            "serial": found.serial if found else None,
            "bus_id": (found.bus_id if found and found.bus_id else _bus_id(address.pci)),
            "product": (found.product if found and found.product
                        else _text(getattr(props, "name", None))),
            "matched_by": how,
        })
    for entry in out:
        entry["key"] = gpu_key(entry, listed)
    return [{name: entry.get(name) for name in FIELDS} for entry in out]


def gpu_key(entry: Mapping[str, Any], listed: Sequence[LibraryDevice]) -> str | None:
    """The key a GPU's history is kept under (see the module's docstring)."""
    serial, uuid = entry.get("serial"), entry.get("uuid")
    if not serial:
        return uuid or None
    sharing = sorted((d for d in listed if d.serial == serial),
                     key=lambda d: d.bus_id or "")
    if len(sharing) <= 1:
        return str(serial)
    if uuid:
        return str(uuid)
    place = next((i for i, d in enumerate(sharing) if d.bus_id == entry.get("bus_id")), None)
    return None if place is None else f"{serial}/{place}"


def _match(index: int, address: DeviceAddress, vendor: str, listed: Sequence[LibraryDevice],
           environ: Mapping[str, str]) -> tuple[LibraryDevice | None, str | None]:
    if not listed:
        return None, None
    if address.pci is not None:
        same = [i for i, d in enumerate(listed) if d.pci == address.pci]
        if len(same) == 1:
            return listed[same[0]], "pci"
        if len(same) > 1:  # partitions of one GPU: the count decides among them
            counted = visible_index(index, environ, vendor)
            return (listed[counted], "pci and order") if counted in same else (None, None)
    if address.uuid is not None:
        wanted = _bare(address.uuid)
        by_uuid = [d for d in listed if d.uuid and _bare(d.uuid) == wanted]
        if len(by_uuid) == 1:
            return by_uuid[0], "uuid"
    if address.pci is None and address.uuid is None:
        counted = visible_index(index, environ, vendor)
        if 0 <= counted < len(listed):
            return listed[counted], "order"
    return None, None


# -- the vendor libraries ----------------------------------------------------------------


def library_devices(vendor: str, importer: Importer = importlib.import_module
                    ) -> list[LibraryDevice]:
    """Every device the vendor's library lists, in its order; [] where it cannot say."""
    try:
        return (_nvml_devices if vendor == NVIDIA else _amdsmi_devices)(importer)
    except Exception:
        return []


def _nvml_devices(importer: Importer) -> list[LibraryDevice]:
    nvml = load_binding("pynvml", importer)
    quietly(nvml.nvmlInit)
    try:
        out = []
        for i in range(int(nvml.nvmlDeviceGetCount())):
            handle = _ask(nvml.nvmlDeviceGetHandleByIndex, i)
            if handle is None:
                out.append(LibraryDevice())
                continue
            info = _ask(getattr(nvml, "nvmlDeviceGetPciInfo", None), handle)
            pci = None
            if info is not None:
                parts = tuple(getattr(info, name, None) for name in ("domain", "bus", "device"))
                if all(isinstance(p, int) and not isinstance(p, bool) for p in parts):
                    pci = (int(parts[0]), int(parts[1]), int(parts[2]))  # type: ignore[arg-type]
            out.append(LibraryDevice(
                pci, _nvml_bus_id(getattr(info, "busId", None)),
                _text(_ask(getattr(nvml, "nvmlDeviceGetUUID", None), handle)),
                _text(_ask(getattr(nvml, "nvmlDeviceGetSerial", None), handle)),
                _text(_ask(getattr(nvml, "nvmlDeviceGetName", None), handle))))
        return out
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def _amdsmi_devices(importer: Importer) -> list[LibraryDevice]:
    lib = load_binding("amdsmi", importer)
    quietly(lib.amdsmi_init)
    try:
        out = []
        for handle in list(lib.amdsmi_get_processor_handles()):
            bdf = _text(_ask(getattr(lib, "amdsmi_get_gpu_device_bdf", None), handle))
            asic = _ask(getattr(lib, "amdsmi_get_gpu_asic_info", None), handle)
            board = _ask(getattr(lib, "amdsmi_get_gpu_board_info", None), handle)
            # The board's serial where amdsmi gives it; else the ASIC's.
            serial = _field(board, "product_serial") or _field(asic, "asic_serial")
            out.append(LibraryDevice(
                pci_device(bdf) if bdf else None, bdf.lower() if bdf else None,
                _text(_ask(getattr(lib, "amdsmi_get_gpu_device_uuid", None), handle)),
                serial,
                _field(asic, "market_name") or _field(board, "product_name")))
        return out
    finally:
        with contextlib.suppress(Exception):
            lib.amdsmi_shut_down()


def _ask(fn: Callable[..., Any] | None, *args: object) -> Any:
    """fn(*args), or None where the binding lacks it or it fails (not supported, lost)."""
    if fn is None:
        return None
    try:
        return fn(*args)
    except Exception:
        return None


def _field(info: object, name: str) -> str | None:
    return _text(info.get(name)) if isinstance(info, Mapping) else None


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        return None
    text = " ".join(value.split())[:MAX_TEXT]
    return None if text.lower() in _NO_VALUE else text


def _nvml_bus_id(value: object) -> str | None:
    """NVML's "00000000:18:00.0" as sysfs spells it: "0000:18:00.0"."""
    text = _text(value)
    return None if text is None else sysfs_address(text)


def _bus_id(pci: tuple[int, int, int] | None) -> str | None:
    return None if pci is None else f"{pci[0]:04x}:{pci[1]:02x}:{pci[2]:02x}.0"


def _torch_uuid(uuid: str | None, vendor: str) -> str | None:
    """PyTorch's UUID of a device as the vendor library writes it ("GPU-..." on NVIDIA)."""
    text = _text(uuid)
    if text is None:
        return None
    if vendor == NVIDIA and not text.lower().startswith(("gpu-", "mig-")):
        return f"GPU-{text}"
    return text


def _bare(value: str) -> str:
    return value.strip().lower().removeprefix("gpu-")
