"""Read the driver stack from the vendors' command-line tools.

Running a tool and parsing its output are kept apart: the parsers are pure functions of
the text a tool printed, tested on recorded outputs, and `driver_info` takes the runner
as an argument so tests can hand it those recordings. Vendor tools change their output
between releases and sometimes print warnings before the JSON, so every parser accepts
partial or unexpected input and returns an empty result rather than raising.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from typing import Any

Runner = Callable[[Sequence[str]], str | None]

NVIDIA_SMI_QUERY = (
    "nvidia-smi",
    "--query-gpu=index,name,driver_version,memory.total,pci.bus_id,vbios_version",
    "--format=csv,noheader,nounits",
)
NVIDIA_SMI_VERSION = ("nvidia-smi", "--version")
AMD_SMI_VERSION = ("amd-smi", "version", "--json")
AMD_SMI_STATIC = ("amd-smi", "static", "--asic", "--driver", "--json")
ROCM_SMI_INFO = ("rocm-smi", "--showdriverversion", "--showproductname", "--json")

_MISSING = {"", "n/a", "[n/a]", "na", "none", "unknown", "not supported", "[not supported]"}


def run_tool(argv: Sequence[str], timeout: float = 5.0) -> str | None:
    """stdout of a vendor tool, or None when it is absent, fails or hangs. Never raises."""
    if not argv:
        return None
    executable = shutil.which(argv[0])
    if executable is None:
        return None
    try:
        proc = subprocess.run(
            [executable, *argv[1:]],
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    if proc.returncode != 0 or not proc.stdout.strip():
        return None
    return proc.stdout


def _value(text: object) -> str | None:
    """A tool's field as a clean string; the many spellings of "not available" become None."""
    if text is None or isinstance(text, (dict, list)):
        return None
    value = str(text).strip()
    return None if value.lower() in _MISSING else value


def _load_json(text: str | None) -> object:
    """The first JSON document in `text`, skipping banner lines printed before it."""
    if not text:
        return None
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text[min(starts) :])
    except ValueError:
        return None
    return value


def _lower_keys(d: dict[str, Any]) -> dict[str, Any]:
    return {str(k).strip().lower(): v for k, v in d.items()}


# --- nvidia-smi -------------------------------------------------------------------------


def parse_nvidia_smi_query(text: str | None) -> list[dict[str, Any]]:
    """Rows of the NVIDIA_SMI_QUERY CSV; lines that do not have its six fields are skipped."""
    gpus: list[dict[str, Any]] = []
    for row in csv.reader((text or "").splitlines(), skipinitialspace=True):
        if len(row) != 6 or not row[0].strip().isdigit():
            continue
        index, name, driver, memory, bus_id, vbios = (field.strip() for field in row)
        memory_mib = _value(memory)
        gpus.append(
            {
                "index": int(index),
                "name": _value(name),
                "driver_version": _value(driver),
                "memory_total_mib": int(memory_mib)
                if memory_mib and memory_mib.isdigit()
                else None,
                "pci_bus_id": _value(bus_id),
                "vbios_version": _value(vbios),
            }
        )
    return gpus


def parse_nvidia_smi_version(text: str | None) -> dict[str, str]:
    """`nvidia-smi --version` ("DRIVER version : 550.90.07", "CUDA Version : 12.4", ...)."""
    fields = {
        "nvidia-smi version": "smi_version",
        "nvml version": "nvml_version",
        "driver version": "driver_version",
        "cuda version": "cuda_version",
    }
    found: dict[str, str] = {}
    for line in (text or "").splitlines():
        label, sep, value = line.partition(":")
        key = fields.get(label.strip().lower())
        clean = _value(value)
        if sep and key and clean:
            found[key] = clean
    return found


# --- amd-smi ----------------------------------------------------------------------------

_AMD_SMI_VERSION_FIELDS = {
    "version": "tool_version",
    "amdsmi tool": "tool_version",
    "amdsmi_library_version": "library_version",
    "amdsmi library version": "library_version",
    "rocm_version": "rocm_version",
    "rocm version": "rocm_version",
    "amdgpu_version": "driver_version",
    "amdgpu version": "driver_version",
}


def parse_amd_smi_version(text: str | None) -> dict[str, str]:
    """`amd-smi version --json`: tool, library, ROCm and (newer releases) amdgpu versions.

    The JSON is a one-element list in recent releases and a bare object in some older
    ones; the plain-text form ("AMDSMI Tool: 24.6.2 | ... | ROCm version: 6.2.0") is read
    too, so a tool that ignores --json still yields its versions.
    """
    data = _load_json(text)
    if isinstance(data, list) and data and isinstance(data[0], dict):
        data = data[0]
    if isinstance(data, dict):
        pairs = list(_lower_keys(data).items())
    else:
        pairs = []
        for part in (text or "").split("|"):
            label, sep, value = part.partition(":")
            if sep:
                pairs.append((label.strip().lower(), value))
    found: dict[str, str] = {}
    for label, value in pairs:
        key = _AMD_SMI_VERSION_FIELDS.get(label)
        clean = _value(value)
        if key and clean:
            found[key] = clean
    return found


def parse_amd_smi_static(text: str | None) -> dict[str, Any]:
    """`amd-smi static --asic --driver --json`: driver version and each GPU's product.

    amd-smi before 26.0 (ROCm 6.x) prints a list of per-GPU objects; 26.0 and later wrap
    that list in {"gpu_data": [...]}. Both are accepted.
    """
    data = _load_json(text)
    if isinstance(data, dict):
        data = data.get("gpu_data", [data] if "gpu" in data else [])
    if not isinstance(data, list):
        return {}
    gpus: list[dict[str, Any]] = []
    driver: str | None = None
    for entry in data:
        if not isinstance(entry, dict):
            continue
        asic = entry["asic"] if isinstance(entry.get("asic"), dict) else {}
        drv = entry["driver"] if isinstance(entry.get("driver"), dict) else {}
        driver = driver or _value(drv.get("version"))
        gpu = {
            "gpu": entry.get("gpu"),
            "product": _value(asic.get("market_name")),
            "gfx_version": _value(asic.get("target_graphics_version")),
        }
        if gpu["product"] or gpu["gfx_version"]:
            gpus.append(gpu)
    result: dict[str, Any] = {}
    if driver:
        result["driver_version"] = driver
    if gpus:
        result["gpus"] = gpus
    return result


# --- rocm-smi ---------------------------------------------------------------------------

_HEX_ID = re.compile(r"^0x[0-9a-f]+$", re.IGNORECASE)
# rocm-smi has spelt the product field differently across releases.
_PRODUCT_KEYS = ("card series", "market name", "device name", "card model")


def _product(card: dict[str, Any]) -> str | None:
    for key in _PRODUCT_KEYS:
        value = _value(card.get(key))
        if value and not _HEX_ID.match(value):
            return value
    return None


def parse_rocm_smi_json(text: str | None) -> dict[str, Any]:
    """`rocm-smi --showdriverversion --showproductname --json`.

    Returns {"driver_version": ..., "cards": [{"card": 0, "product": ..., "gfx_version": ...}]}
    with absent parts left out.
    """
    data = _load_json(text)
    if not isinstance(data, dict):
        return {}
    result: dict[str, Any] = {}
    cards: list[dict[str, Any]] = []
    for name, fields in data.items():
        if not isinstance(fields, dict):
            continue
        fields = _lower_keys(fields)
        driver = _value(fields.get("driver version"))
        if driver and "driver_version" not in result:
            result["driver_version"] = driver
        match = re.fullmatch(r"card(\d+)", str(name).strip().lower())
        if match:
            cards.append(
                {
                    "card": int(match.group(1)),
                    "product": _product(fields),
                    "gfx_version": _value(fields.get("gfx version")),
                }
            )
    if cards:
        result["cards"] = sorted(cards, key=lambda c: c["card"])
    return result


# --- the driver stack, per platform -----------------------------------------------------


def _nvidia_driver(run: Runner) -> dict[str, Any]:
    gpus = parse_nvidia_smi_query(run(list(NVIDIA_SMI_QUERY)))
    version = parse_nvidia_smi_version(run(list(NVIDIA_SMI_VERSION)))
    info: dict[str, Any] = {}
    driver = next((g["driver_version"] for g in gpus if g["driver_version"]), None)
    driver = driver or version.get("driver_version")
    if driver:
        info["driver_version"] = driver
    if version.get("cuda_version"):
        info["cuda_driver_version"] = version["cuda_version"]
    products = [g["name"] for g in gpus if g["name"]]
    if products:
        info["products"] = products
    vbios = sorted({g["vbios_version"] for g in gpus if g["vbios_version"]})
    if vbios:
        info["vbios_versions"] = vbios
    if info:
        info["tool"] = "nvidia-smi"
    return info


def _amd_driver(run: Runner) -> dict[str, Any]:
    info: dict[str, Any] = {}
    tools: list[str] = []
    version = parse_amd_smi_version(run(list(AMD_SMI_VERSION)))
    if version:
        tools.append("amd-smi")
        static = parse_amd_smi_static(run(list(AMD_SMI_STATIC)))
        info["amd_smi_version"] = version.get("tool_version")
        info["rocm_version"] = version.get("rocm_version")
        info["driver_version"] = version.get("driver_version") or static.get("driver_version")
        info["products"] = [g["product"] for g in static.get("gpus", []) if g["product"]]
    if not info.get("driver_version") or not info.get("products"):
        rocm_smi = parse_rocm_smi_json(run(list(ROCM_SMI_INFO)))
        if rocm_smi:
            tools.append("rocm-smi")
            info["driver_version"] = info.get("driver_version") or rocm_smi.get("driver_version")
            info["products"] = info.get("products") or [
                c["product"] for c in rocm_smi.get("cards", []) if c["product"]
            ]
    info = {k: v for k, v in info.items() if v}
    if info:
        info["tool"] = ", ".join(tools)
    return info


def driver_info(platform: str, run: Runner = run_tool) -> dict[str, Any]:
    """What the vendor tools say about the driver stack; {} when nothing could be read.

    "cuda" reads nvidia-smi; "rocm" reads amd-smi and falls back on rocm-smi (deprecated,
    but still the only tool on older installs) for whatever amd-smi did not give.
    """
    if platform == "cuda":
        return _nvidia_driver(run)
    if platform == "rocm":
        return _amd_driver(run)
    return {}
