"""Where telemetry comes from, and picking the sources that exist for a device.

A source is anything with a `name`, a `read()` that returns one reading of its channels
(None for a channel it could not read this time) and a `close()`. A source may also
offer, read by the sampler when present: `wrap_j` (counter channel -> wrap value in J),
`throttle_names` (THROTTLE bit -> name) and `channel_sources` (channel -> the name to
credit, such as "rapl" for the host's CPU energy).
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable, Collection, Mapping
from typing import Protocol

from accelbench.core.untrusted import is_decimal
from accelbench.env.host.readings import PathLike
from accelbench.env.telemetry.amd import (
    CLI_TIMEOUT_S,
    AmdSmiCliSource,
    AmdSmiSource,
    CliRunner,
    run_cli,
)
from accelbench.env.telemetry.guard import Importer, SourceUnavailable
from accelbench.env.telemetry.host import HostSource
from accelbench.env.telemetry.nvidia import NvmlSource

__all__ = [
    "SOURCE_NAMES",
    "AmdSmiCliSource",
    "AmdSmiSource",
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


VISIBLE_DEVICES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


def vendor_index(torch_index: int | None, environ: Mapping[str, str] | None = None
                 ) -> int | None:
    """The vendor library's index of PyTorch's device `torch_index`: NVML and amdsmi count
    every device of the node, PyTorch only the visible ones, renumbered from 0. A list of
    numbers in *_VISIBLE_DEVICES maps one to the other; UUIDs, or nothing set, leave the
    index as it is."""
    if torch_index is None:
        return None
    env = os.environ if environ is None else environ
    # ROCm applies ROCR_VISIBLE_DEVICES first, then HIP_VISIBLE_DEVICES (or, where that is
    # not set, CUDA_VISIBLE_DEVICES) to what is left; CUDA reads CUDA_VISIBLE_DEVICES.
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
