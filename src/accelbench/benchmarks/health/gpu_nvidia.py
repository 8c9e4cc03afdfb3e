"""NVIDIA GPU health through NVML (the nvidia-ml-py distribution, imported as pynvml), as
the plain data of `gpu.GpuHealth.to_dict()`.

Each reading is one guarded call: pynvml raises an NVMLError subclass
(NVMLError_NotSupported, NVMLError_InvalidArgument, ...) for a counter the GPU lacks,
which costs that field only.

`read_pairs` reads only what the wiring matrix needs: which GPUs NVLink joins and with how
many links (`nvlink_pairs` states the rule).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from accelbench.benchmarks.health.vendor_session import read_with
from accelbench.env.pcie import sysfs_address
from accelbench.env.telemetry.guard import (
    Guard,
    Importer,
    number,
)

SOURCE = "nvml"

_GTS_BY_GEN = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}

# nvmlClocksEventReasons (nvmlClocksThrottleReasons before driver 535), by bit.
CLOCK_EVENT_NAMES: Mapping[int, str] = {
    0x1: "GpuIdle", 0x2: "ApplicationsClocksSetting", 0x4: "SwPowerCap",
    0x8: "HwSlowdown", 0x10: "SyncBoost", 0x20: "SwThermalSlowdown",
    0x40: "HwThermalSlowdown", 0x80: "HwPowerBrakeSlowdown", 0x100: "DisplayClockSetting",
}  # fmt: skip

# nvmlMemoryLocation_t names read per block (DRAM and DEVICE_MEMORY are one value).
_LOCATIONS = ("DRAM", "SRAM", "L1_CACHE", "L2_CACHE", "REGISTER_FILE", "TEXTURE_MEMORY",
              "TEXTURE_SHM", "CBU")

# nvmlNvLinkErrorCounter_t values read per link, with their names here.
_NVLINK_COUNTERS = (("replay", "NVML_NVLINK_ERROR_DL_REPLAY", 0),
                    ("recovery", "NVML_NVLINK_ERROR_DL_RECOVERY", 1),
                    ("crc_flit", "NVML_NVLINK_ERROR_DL_CRC_FLIT", 2),
                    ("crc_data", "NVML_NVLINK_ERROR_DL_CRC_DATA", 3))

Raw = dict[str, Any]


def read(importer: Importer) -> tuple[str, list[Raw], str | None]:
    """(source, one raw reading per GPU, why none could be read)."""
    return read_with(SOURCE, "NVML", "pynvml", "NVMLError", "nvmlInit", "nvmlShutdown",
                     importer, _read_all)


def read_pairs(importer: Importer) -> tuple[str, list[Raw], str | None]:
    """(source, one entry per pair of GPUs NVLink joins, why none could be read)."""
    return read_with(SOURCE, "NVML", "pynvml", "NVMLError", "nvmlInit", "nvmlShutdown",
                     importer, _read_pairs)


def nvlink_pairs(ends: Sequence[Raw | None]) -> list[Raw]:
    """The pairs of GPUs NVLink joins, from each GPU's active links (`_Gpu.link_ends`):
    {"a", "b" (PCI addresses, a < b), "kind": "nvlink", "links", "direct", "switched"}.

    `links` is what nvidia-smi prints as NV<links>: the links going straight from one GPU
    to the other (the fewer of the two ends' counts, as a link is only usable with both
    ends up), plus, for each NVSwitch both GPUs reach, the fewer of the two GPUs' links to
    that switch, since traffic between them through the switch cannot use more links than
    either end has. On an HGX H100 board each GPU has 18 links spread over four switches,
    so every pair reads NV18; a GPU that lost one link reads NV17 with every peer. A link's
    far end is a switch where NVML says so (nvmlDeviceGetNvLinkRemoteDeviceType) or, where
    it cannot say, where the far end is not a GPU of the node; a link whose far end NVML
    cannot name counts toward no pair."""
    gpus = [e for e in ends if e is not None and e.get("bus_id")]
    addresses = {str(e["bus_id"]) for e in gpus}
    straight: dict[str, Counter[str]] = {}
    switched: dict[str, Counter[str]] = {}
    for gpu in gpus:
        own = str(gpu["bus_id"])
        straight[own], switched[own] = Counter(), Counter()
        for end in gpu["ends"]:
            remote, is_switch = end.get("remote"), end.get("switch")
            if remote is None or remote == own:
                continue
            if is_switch is None:
                is_switch = remote not in addresses
            if is_switch:
                switched[own][remote] += 1
            elif remote in addresses:
                straight[own][remote] += 1
    pairs = []
    ordered = sorted(addresses)
    for i, a in enumerate(ordered):
        for b in ordered[i + 1:]:
            direct = min(straight[a][b], straight[b][a])
            through = sum(min(n, switched[b][switch]) for switch, n in switched[a].items())
            if direct + through:
                pairs.append({"a": a, "b": b, "kind": "nvlink", "links": direct + through,
                              "direct": direct, "switched": through})
    return pairs


def _gpu_count(nvml: Any, errors: tuple[type[BaseException], ...]) -> tuple[int, str | None]:
    """How many GPUs NVML sees, or why there are none."""
    try:
        count = int(nvml.nvmlDeviceGetCount())
    except errors as exc:
        return 0, f"NVML found no GPUs: {exc}"
    return count, None if count > 0 else "NVML found no GPUs"


def _read_pairs(nvml: Any, errors: tuple[type[BaseException], ...]
                ) -> tuple[str, list[Raw], str | None]:
    count, none = _gpu_count(nvml, errors)
    if none is not None:
        return SOURCE, [], none
    return SOURCE, nvlink_pairs([_Gpu(nvml, errors).link_ends(i) for i in range(count)]), None


def _read_all(nvml: Any, errors: tuple[type[BaseException], ...]
              ) -> tuple[str, list[Raw], str | None]:
    count, none = _gpu_count(nvml, errors)
    if none is not None:
        return SOURCE, [], none
    driver = _text(Guard(errors).call(nvml.nvmlSystemGetDriverVersion))
    return SOURCE, [_Gpu(nvml, errors).read(i, driver) for i in range(count)], None


class _Gpu:
    """One NVML device; `ask` is a guarded call of the binding's function by name."""

    def __init__(self, nvml: Any, errors: tuple[type[BaseException], ...]) -> None:
        self.nvml = nvml
        self.guard = Guard(errors)
        self.handle: object = None

    def ask(self, name: str, *args: object) -> Any:
        fn = getattr(self.nvml, name, None)
        return None if fn is None else self.guard.call(fn, self.handle, *args)

    def const(self, name: str, default: int) -> int:
        value = getattr(self.nvml, name, default)
        return int(value) if isinstance(value, int) else default

    def read(self, index: int, driver: str | None) -> Raw:
        """The GPU's reading; a GPU NVML cannot open (lost, off the bus) gives only its
        index, every other field None."""
        found: Raw = {"index": index, "vendor": "nvidia", "driver_version": driver}
        self.handle = self.guard.call(self.nvml.nvmlDeviceGetHandleByIndex, index)
        if self.handle is None:
            return found
        ecc_mode = self.ask("nvmlDeviceGetEccMode")
        current_ecc = _count(ecc_mode[0]) if isinstance(ecc_mode, (list, tuple)) else None
        return {
            **found,
            "name": _text(self.ask("nvmlDeviceGetName")),
            "bus_id": _bus_id(getattr(self.ask("nvmlDeviceGetPciInfo"), "busId", None)),
            "serial": _text(self.ask("nvmlDeviceGetSerial")),
            "firmware": self._firmware(),
            "ecc_enabled": None if current_ecc is None else current_ecc == self.const(
                "NVML_FEATURE_ENABLED", 1),
            "ecc_supported": True if current_ecc is not None else None,
            "ecc": self._ecc(),
            "pages": self._pages(),
            "pcie": self._pcie(),
            "links": self._links(),
            "link_error_status": None,
            "throttle": self._throttle(),
            "utilization_pct": number(getattr(self.ask("nvmlDeviceGetUtilizationRates"),
                                              "gpu", None)),
        }

    def link_ends(self, index: int) -> Raw | None:
        """The GPU's address and the far end of each active NVLink: {"remote": address or
        None, "switch": whether NVML says the far end is an NVSwitch, None where it cannot
        say}; None for a GPU NVML cannot open."""
        self.handle = self.guard.call(self.nvml.nvmlDeviceGetHandleByIndex, index)
        if self.handle is None:
            return None
        enabled = self.const("NVML_FEATURE_ENABLED", 1)
        switch = self.const("NVML_NVLINK_DEVICE_TYPE_SWITCH", 2)
        unknown = self.const("NVML_NVLINK_DEVICE_TYPE_UNKNOWN", 0xFF)
        ends = []
        for link in range(self.const("NVML_NVLINK_MAX_LINKS", 18)):
            if _count(self.ask("nvmlDeviceGetNvLinkState", link)) != enabled:
                continue
            remote = self.ask("nvmlDeviceGetNvLinkRemotePciInfo", link)
            kind = _count(self.ask("nvmlDeviceGetNvLinkRemoteDeviceType", link))
            ends.append({"remote": _bus_id(getattr(remote, "busId", None)),
                         "switch": None if kind in (None, unknown) else kind == switch})
        return {"bus_id": _bus_id(getattr(self.ask("nvmlDeviceGetPciInfo"), "busId", None)),
                "ends": ends}

    def _firmware(self) -> dict[str, str] | None:
        versions = {"VBIOS": _text(self.ask("nvmlDeviceGetVbiosVersion")),
                    "InfoROM": _text(self.ask("nvmlDeviceGetInforomImageVersion"))}
        found = {name: v for name, v in versions.items() if v is not None}
        return found or None

    def _ecc(self) -> list[Raw] | None:
        """Totals and per-block counts, volatile (since the driver loaded) and aggregate
        (lifetime), where the GPU keeps them."""
        corrected = self.const("NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
        uncorrected = self.const("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
        counts = []
        for scope, counter in (("volatile", self.const("NVML_VOLATILE_ECC", 0)),
                               ("aggregate", self.const("NVML_AGGREGATE_ECC", 1))):
            blocks: list[tuple[str, str, tuple[object, ...]]] = [
                ("total", "nvmlDeviceGetTotalEccErrors", ())]
            blocks += [(name, "nvmlDeviceGetMemoryErrorCounter", (location,))
                       for name in _LOCATIONS
                       if (location := getattr(self.nvml, f"NVML_MEMORY_LOCATION_{name}", None))
                       is not None]
            for block, fn, where in blocks:
                fixed = _count(self.ask(fn, corrected, counter, *where))
                lost = _count(self.ask(fn, uncorrected, counter, *where))
                if fixed is not None or lost is not None:
                    counts.append({"block": block, "scope": scope, "correctable": fixed,
                                   "uncorrectable": lost, "deferred": None})
        return counts or None

    def _pages(self) -> Raw | None:
        retired = None
        for cause in (self.const("NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0),
                      self.const("NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1)):
            pages = self.ask("nvmlDeviceGetRetiredPages", cause)
            if isinstance(pages, list):
                retired = (retired or 0) + len(pages)
        pending = _count(self.ask("nvmlDeviceGetRetiredPagesPendingStatus"))
        rows = self.ask("nvmlDeviceGetRemappedRows")
        rows = [_count(v) for v in rows] if isinstance(rows, (list, tuple)) and len(
            rows) == 4 else [None] * 4
        found = {"retired": retired, "pending": None, "unrepairable": None,
                 "retirement_pending": None if pending is None else bool(pending),
                 "rows_corrected": rows[0], "rows_uncorrected": rows[1],
                 "remap_pending": None if rows[2] is None else bool(rows[2]),
                 "remap_failed": None if rows[3] is None else bool(rows[3])}
        return found if any(v is not None for v in found.values()) else None

    def _pcie(self) -> Raw | None:
        found = {
            "gen": _count(self.ask("nvmlDeviceGetCurrPcieLinkGeneration")),
            "gen_max": _count(self.ask("nvmlDeviceGetMaxPcieLinkGeneration")),
            "gen_gpu_max": _count(self.ask("nvmlDeviceGetGpuMaxPcieLinkGeneration")),
            "width": _count(self.ask("nvmlDeviceGetCurrPcieLinkWidth")),
            "width_max": _count(self.ask("nvmlDeviceGetMaxPcieLinkWidth")),
            "replay": _count(self.ask("nvmlDeviceGetPcieReplayCounter")),
        }
        if all(v is None for v in found.values()):
            return None
        return {**found,
                "speed_gts": _GTS_BY_GEN.get(found["gen"] or 0),
                "speed_max_gts": _GTS_BY_GEN.get(found["gen_max"] or 0),
                "replay_rollover": None, "nak_sent": None, "nak_received": None,
                "l0_to_recovery": None}

    def _links(self) -> list[Raw]:
        """Every NVLink whose state NVML answers; links the GPU lacks raise and are left
        out, so a GPU without NVLink gives an empty list."""
        enabled = self.const("NVML_FEATURE_ENABLED", 1)
        links = []
        for index in range(self.const("NVML_NVLINK_MAX_LINKS", 18)):
            state = _count(self.ask("nvmlDeviceGetNvLinkState", index))
            if state is None:
                continue
            remote = self.ask("nvmlDeviceGetNvLinkRemotePciInfo", index)
            errors = {name: _count(self.ask("nvmlDeviceGetNvLinkErrorCounter", index,
                                            self.const(const, default)))
                      for name, const, default in _NVLINK_COUNTERS}
            links.append({"kind": "nvlink", "index": index,
                          "state": "up" if state == enabled else "down",
                          "remote": _bus_id(getattr(remote, "busId", None)),
                          "errors": {k: v for k, v in errors.items() if v is not None},
                          "speed_gbps": None})
        return links

    def _throttle(self) -> list[str] | None:
        """The clock-event reasons active now, by name (renamed from throttle reasons in
        driver 535; the older call is the fallback)."""
        reasons = self.ask("nvmlDeviceGetCurrentClocksEventReasons")
        if reasons is None:
            reasons = self.ask("nvmlDeviceGetCurrentClocksThrottleReasons")
        if isinstance(reasons, bool) or not isinstance(reasons, int):
            return None
        return [CLOCK_EVENT_NAMES.get(1 << bit, hex(1 << bit))
                for bit in range(64) if reasons >> bit & 1]


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    if not isinstance(value, str):
        return None
    value = value.strip()
    return value or None


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _bus_id(value: object) -> str | None:
    """NVML's "00000000:18:00.0" as sysfs spells it: "0000:18:00.0"."""
    text = _text(value)
    return None if text is None else sysfs_address(text)
