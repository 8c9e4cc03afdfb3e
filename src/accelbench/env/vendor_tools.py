"""Read the driver stack from the vendors' command-line tools.

Running a tool and parsing its output are kept apart: the parsers are pure functions of
the text a tool printed, tested on recorded outputs, and `driver_info` takes the runner
as an argument so tests can hand it those recordings. Vendor tools change their output
between releases and sometimes print warnings before the JSON, so every parser accepts
partial or unexpected input and returns an empty result rather than raising.

A tool that is missing, fails, hangs or prints what cannot be read is not an error, but
it is said: `driver_info` lists it under "problems", so that a report can tell why the
driver fields are empty.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

NVIDIA_SMI_QUERY = (
    "nvidia-smi",
    "--query-gpu=index,name,driver_version,memory.total,pci.bus_id,vbios_version",
    "--format=csv,noheader,nounits",
)
NVIDIA_SMI_VERSION = ("nvidia-smi", "--version")
AMD_SMI_VERSION = ("amd-smi", "version", "--json")
AMD_SMI_STATIC = ("amd-smi", "static", "--asic", "--driver", "--json")
ROCM_SMI_INFO = ("rocm-smi", "--showdriverversion", "--showproductname", "--json")

# How long each command may take before it counts as hung. amd-smi initialises its
# library and walks every GPU on each call, and `static` reads each GPU's tables on top:
# on an 8-GPU node this takes seconds, and far longer while the GPUs are busy or the
# driver starts cold (AMD's own metrics exporter found a 15 s query limit too short on
# 16-GCD MI250X nodes). nvidia-smi without persistence mode sets up and tears down the
# driver state of every GPU on each call, seconds per GPU on a large node. Any of them can
# also hang for good on a broken driver, so each limit is bounded: at most 20 + 30 + 20 s
# for the ROCm tools and 20 + 20 s for nvidia-smi, well inside the time the runner gives
# a worker to take a fingerprint.
TIMEOUTS_S: dict[tuple[str, ...], float] = {
    AMD_SMI_VERSION: 20.0,
    AMD_SMI_STATIC: 30.0,
    ROCM_SMI_INFO: 20.0,
    NVIDIA_SMI_QUERY: 20.0,
    NVIDIA_SMI_VERSION: 20.0,
}
DEFAULT_TIMEOUT_S = 20.0

# Why a tool gave nothing.
MISSING = "not installed"
FAILED = "failed"
TIMED_OUT = "timed out"
UNREADABLE = "unreadable output"

_MISSING = {"", "n/a", "[n/a]", "na", "none", "unknown", "not supported", "[not supported]"}


@dataclass(frozen=True)
class ToolRun:
    """What one run of a vendor tool gave: its output, or why there is none."""

    stdout: str | None = None
    problem: str | None = None  # None, MISSING, FAILED or TIMED_OUT
    detail: str = ""  # "exit status 2", "no answer within 30 s"

    def describe(self) -> str:
        return f"{self.problem} ({self.detail})" if self.detail else str(self.problem)


Runner = Callable[[Sequence[str], float], ToolRun]


def run_tool(argv: Sequence[str], timeout: float) -> ToolRun:
    """Run a vendor tool for at most `timeout` seconds. Never raises."""
    executable = shutil.which(argv[0]) if argv else None
    if executable is None:
        return ToolRun(problem=MISSING)
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
    except subprocess.TimeoutExpired:
        return ToolRun(problem=TIMED_OUT, detail=f"no answer within {timeout:g} s")
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        return ToolRun(problem=FAILED, detail=type(e).__name__)
    if proc.returncode != 0:
        return ToolRun(problem=FAILED, detail=f"exit status {proc.returncode}")
    if not proc.stdout.strip():
        return ToolRun(problem=FAILED, detail="printed nothing")
    return ToolRun(proc.stdout)


class _Tools:
    """Runs the commands of one `driver_info` call and notes what each did not give.

    A tool that is missing or hung is not asked again in the same call: a second command
    of a hung tool would only hang as long again."""

    def __init__(self, run: Runner) -> None:
        self._run = run
        self._given_up: set[str] = set()
        self.problems: list[str] = []

    def __call__(self, argv: tuple[str, ...]) -> str | None:
        tool = argv[0]
        if tool in self._given_up:
            return None
        result = self._run(list(argv), TIMEOUTS_S.get(argv, DEFAULT_TIMEOUT_S))
        if result.problem == MISSING:
            self._given_up.add(tool)
            self.problems.append(f"{tool}: {MISSING}")
        elif result.problem is not None:
            if result.problem == TIMED_OUT:
                self._given_up.add(tool)
            self.problems.append(f"{_command(argv)}: {result.describe()}")
        return result.stdout

    def unreadable(self, argv: tuple[str, ...]) -> None:
        self.problems.append(f"{_command(argv)}: {UNREADABLE}")


_COMMANDS = {
    AMD_SMI_VERSION: "amd-smi version",
    AMD_SMI_STATIC: "amd-smi static",
    ROCM_SMI_INFO: "rocm-smi",
    NVIDIA_SMI_QUERY: "nvidia-smi --query-gpu",
    NVIDIA_SMI_VERSION: "nvidia-smi --version",
}


def _command(argv: tuple[str, ...]) -> str:
    """A command as a report names it: "amd-smi static"."""
    return _COMMANDS.get(argv, " ".join(argv))


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


def _nvidia_driver(tools: _Tools) -> dict[str, Any]:
    text = tools(NVIDIA_SMI_QUERY)
    gpus = parse_nvidia_smi_query(text)
    if text and not gpus:
        tools.unreadable(NVIDIA_SMI_QUERY)
    text = tools(NVIDIA_SMI_VERSION)
    version = parse_nvidia_smi_version(text)
    if text and not version:
        tools.unreadable(NVIDIA_SMI_VERSION)
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


def _amd_driver(tools: _Tools) -> dict[str, Any]:
    info: dict[str, Any] = {}
    used: list[str] = []
    text = tools(AMD_SMI_VERSION)
    version = parse_amd_smi_version(text)
    if text and not version:
        tools.unreadable(AMD_SMI_VERSION)
    if version:
        used.append("amd-smi")
        text = tools(AMD_SMI_STATIC)
        static = parse_amd_smi_static(text)
        if text and not static:
            tools.unreadable(AMD_SMI_STATIC)
        info["amd_smi_version"] = version.get("tool_version")
        info["rocm_version"] = version.get("rocm_version")
        info["driver_version"] = version.get("driver_version") or static.get("driver_version")
        info["products"] = [g["product"] for g in static.get("gpus", []) if g["product"]]
    if not info.get("driver_version") or not info.get("products"):
        text = tools(ROCM_SMI_INFO)
        rocm_smi = parse_rocm_smi_json(text)
        if text and not rocm_smi:
            tools.unreadable(ROCM_SMI_INFO)
        if rocm_smi:
            used.append("rocm-smi")
            info["driver_version"] = info.get("driver_version") or rocm_smi.get("driver_version")
            info["products"] = info.get("products") or [
                c["product"] for c in rocm_smi.get("cards", []) if c["product"]
            ]
    info = {k: v for k, v in info.items() if v}
    if info:
        info["tool"] = ", ".join(used)
    return info


def driver_info(platform: str, run: Runner = run_tool) -> dict[str, Any]:
    """What the vendor tools say about the driver stack; {} when there is nothing to say.

    "cuda" reads nvidia-smi; "rocm" reads amd-smi and falls back on rocm-smi (deprecated,
    but still the only tool on older installs) for whatever amd-smi did not give. Each
    command that gave nothing is listed under "problems" ("amd-smi static: timed out (no
    answer within 30 s)", "rocm-smi: not installed").
    """
    readers = {"cuda": _nvidia_driver, "rocm": _amd_driver}
    if platform not in readers:
        return {}
    tools = _Tools(run)
    info = readers[platform](tools)
    if tools.problems:
        info["problems"] = tools.problems
    return info
