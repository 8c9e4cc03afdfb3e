"""AMD GPU health through the amdsmi Python binding, as the plain data of
`gpu.GpuHealth.to_dict()`.

Each reading is one guarded call: amdsmi raises AmdSmiLibraryException (an
AmdSmiException) for AMDSMI_STATUS_NOT_SUPPORTED and friends, which costs that field only;
"N/A" strings and all-ones values are its way of saying "no value".

`read_pairs` reads only what the wiring matrix needs: what amdsmi_topo_get_link_type says
joins each pair of GPUs (the link type and the hops between them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accelbench.benchmarks.health.vendor_session import line, read_with
from accelbench.env.telemetry.amd import (
    SMU_THROTTLE_NAMES,
    VIOLATION_FIELDS,
    violation_flag,
)
from accelbench.env.telemetry.guard import (
    Guard,
    Importer,
    number,
)

SOURCE = "amdsmi"

# amdsmi_get_pcie_info reports speeds in MT/s (newer releases document GT/s).
_GEN_BY_GTS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}

# amdsmi_get_gpu_xgmi_link_status: one letter per link, AMDSMI_XGMI_LINK_UP, _DOWN and
# _DISABLE, and "N/A" for a value the binding does not name (amdsmi_interface.py). On a
# partitioned GPU (DPX, QPX, CPX) only the primary compute partition sees the device's
# metrics (amdsmi's docs/conceptual/partition.md); the others may answer N/A or not at
# all. Such a link is read with state None: not reported, which is not down.
_XGMI_STATES = {"U": "up", "D": "down", "X": "disabled"}

# amdsmi_get_gpu_ras_feature_info: the ECC schemes the part implements.
_ECC_SCHEMAS = ("parity_schema", "single_bit_schema", "double_bit_schema", "poison_schema")

_NO_ADDRESS = "0000:00:00.0"

Raw = dict[str, Any]


def read(importer: Importer) -> tuple[str, list[Raw], str | None]:
    """(source, one raw reading per GPU, why none could be read)."""
    return read_with(SOURCE, "amdsmi", "amdsmi", "AmdSmiException", "amdsmi_init",
                     "amdsmi_shut_down", importer, _read_all)


def read_pairs(importer: Importer) -> tuple[str, list[Raw], str | None]:
    """(source, one entry per pair of GPUs: {"a", "b" (PCI addresses, a < b), "kind"
    ("xgmi", "pcie", ... as the binding names the link type), "hops"}, why none could be
    read). A pair amdsmi does not answer for is left out."""
    return read_with(SOURCE, "amdsmi", "amdsmi", "AmdSmiException", "amdsmi_init",
                     "amdsmi_shut_down", importer, _read_pairs)


def _handles(lib: Any, errors: tuple[type[BaseException], ...]) -> tuple[list[Any], str | None]:
    """amdsmi's GPUs, or why there are none."""
    try:
        handles = list(lib.amdsmi_get_processor_handles())
    except errors as exc:
        return [], f"amdsmi found no GPUs: {line(exc)}"
    return handles, None if handles else "amdsmi found no GPUs"


def _read_pairs(lib: Any, errors: tuple[type[BaseException], ...]
                ) -> tuple[str, list[Raw], str | None]:
    handles, none = _handles(lib, errors)
    if none is not None:
        return SOURCE, [], none
    guard = Guard(errors)
    found = [(a, h) for h in handles
             if (a := _address(guard.call(lib.amdsmi_get_gpu_device_bdf, h))) is not None]
    found.sort(key=lambda item: item[0])
    pairs = []
    for i, (a, first) in enumerate(found):
        for b, second in found[i + 1:]:
            answer = guard.call(lib.amdsmi_topo_get_link_type, first, second)
            if isinstance(answer, (list, tuple)) and len(answer) == 2:
                answer = {"hops": answer[0], "type": answer[1]}
            kind = _link_kind(lib, _get(answer, "type"))
            if kind is not None:
                pairs.append({"a": a, "b": b, "kind": kind,
                              "hops": _count(_value(_get(answer, "hops")))})
    return SOURCE, pairs, None


def _link_kind(lib: Any, value: object) -> str | None:
    """The link type's name ("xgmi", "pcie") by the binding's own enum, whose numbering
    changed between releases (AmdSmiLinkType, AmdSmiIoLinkType before it); a number the
    binding does not name is kept as "type <n>"."""
    number_ = _count(_value(value))
    if number_ is None:
        return None
    for enum_name, prefix in (("AmdSmiLinkType", "AMDSMI_LINK_TYPE_"),
                              ("AmdSmiIoLinkType", "AMDSMI_IOLINK_TYPE_")):
        for member in getattr(lib, enum_name, None) or ():
            if int(member) == number_:
                name = str(member.name).removeprefix(prefix).lower()
                return "pcie" if name == "pciexpress" else name
    return f"type {number_}"


def _value(value: object) -> object:
    """A ctypes number's value (older bindings return the ctypes object itself)."""
    return getattr(value, "value", value) if not isinstance(value, int) else value


def _read_all(lib: Any, errors: tuple[type[BaseException], ...]
              ) -> tuple[str, list[Raw], str | None]:
    handles, none = _handles(lib, errors)
    if none is not None:
        return SOURCE, [], none
    return SOURCE, [_Gpu(lib, errors, h).read(i) for i, h in enumerate(handles)], None


class _Gpu:
    """One processor handle; `ask` is a guarded call of the binding's function by name."""

    def __init__(self, lib: Any, errors: tuple[type[BaseException], ...],
                 handle: object) -> None:
        self.lib = lib
        self.handle = handle
        self.guard = Guard(errors)

    def ask(self, name: str, *args: object) -> Any:
        fn = getattr(self.lib, name, None)
        return None if fn is None else self.guard.call(fn, self.handle, *args)

    def enum(self, enum_name: str, member: str) -> int | None:
        value = getattr(getattr(self.lib, enum_name, None), member, None)
        return None if value is None else int(value)

    def read(self, index: int) -> Raw:
        asic = self.ask("amdsmi_get_gpu_asic_info")
        mask = _count(self.ask("amdsmi_get_gpu_ecc_enabled"))
        umc = self.enum("AmdSmiGpuBlock", "UMC")
        activity = self.ask("amdsmi_get_gpu_activity")
        return {
            "index": index,
            "vendor": "amd",
            "name": _text(_get(asic, "market_name")),
            "bus_id": _address(self.ask("amdsmi_get_gpu_device_bdf")),
            "serial": _text(_get(asic, "asic_serial")),
            "driver_version": _text(_get(self.ask("amdsmi_get_gpu_driver_info"),
                                         "driver_version")),
            "firmware": self._firmware(),
            "ecc_enabled": None if mask is None or umc is None else bool(mask & umc),
            "ecc_supported": self._ecc_supported(mask),
            "ecc": self._ecc(mask),
            "pages": self._pages(),
            "pcie": self._pcie(),
            "links": self._links(),
            "link_error_status": self._xgmi_error(),
            "throttle": self._throttle(),
            "utilization_pct": number(_get(activity, "gfx_activity")),
        }

    def _firmware(self) -> dict[str, str] | None:
        found: dict[str, str] = {}
        listed = _get(self.ask("amdsmi_get_fw_info"), "fw_list")
        for entry in listed if isinstance(listed, list) else []:
            name = _get(entry, "fw_name")
            version = _text(_get(entry, "fw_version"))
            if name is not None and version is not None:
                found[str(getattr(name, "name", name)).removeprefix("AMDSMI_FW_ID_")] = version
        vbios = _text(_get(self.ask("amdsmi_get_gpu_vbios_info"), "version"))
        if vbios is not None:
            found["VBIOS"] = vbios
        return found or None

    def _ecc_supported(self, mask: int | None) -> bool | None:
        features = self.ask("amdsmi_get_gpu_ras_feature_info")
        if isinstance(features, Mapping):
            return any(features.get(schema) is True for schema in _ECC_SCHEMAS)
        return True if mask else None

    def _ecc(self, mask: int | None) -> list[Raw] | None:
        counts = []
        for block in getattr(self.lib, "AmdSmiGpuBlock", ()):
            if block.name in ("INVALID", "RESERVED") or (mask is not None
                                                          and not mask & int(block)):
                continue
            found = self.ask("amdsmi_get_gpu_ecc_count", block)
            if isinstance(found, Mapping):
                counts.append(_ecc_count(block.name, found))
        total = self.ask("amdsmi_get_gpu_total_ecc_count")
        if isinstance(total, Mapping):
            counts.append(_ecc_count("total", total))
        return counts or None

    def _pages(self) -> Raw | None:
        pages = self.ask("amdsmi_get_gpu_bad_page_info")
        if not isinstance(pages, list):
            return None
        statuses = [_count(_get(p, "status")) for p in pages]

        def with_status(member: str, default: int) -> int:
            value = self.enum("AmdSmiMemoryPageStatus", member)
            return statuses.count(default if value is None else value)

        return {"retired": with_status("RESERVED", 0), "pending": with_status("PENDING", 1),
                "unrepairable": with_status("UNRESERVABLE", 2)}

    def _pcie(self) -> Raw | None:
        info = self.ask("amdsmi_get_pcie_info")
        if not isinstance(info, Mapping):
            return None
        static, metric = info.get("pcie_static"), info.get("pcie_metric")
        speed_max = _gts(number(_get(static, "max_pcie_speed")))
        speed = _gts(number(_get(metric, "pcie_speed")))
        gen_max = _GEN_BY_GTS.get(speed_max) if speed_max is not None else None
        if gen_max is None:
            version = _count(_get(static, "pcie_interface_version"))
            gen_max = version if version in _GEN_BY_GTS.values() else None
        return {
            "gen": _GEN_BY_GTS.get(speed) if speed is not None else None,
            "gen_max": gen_max,
            "gen_gpu_max": None,
            "width": _count(_get(metric, "pcie_width")),
            "width_max": _count(_get(static, "max_pcie_width")),
            "speed_gts": speed,
            "speed_max_gts": speed_max,
            "replay": _count(_get(metric, "pcie_replay_count")),
            "replay_rollover": _count(_get(metric, "pcie_replay_roll_over_count")),
            "nak_sent": _count(_get(metric, "pcie_nak_sent_count")),
            "nak_received": _count(_get(metric, "pcie_nak_received_count")),
            "l0_to_recovery": _count(_get(metric, "pcie_l0_to_recovery_count")),
        }

    def _links(self) -> list[Raw] | None:
        """XGMI links: the state from amdsmi_get_gpu_xgmi_link_status, the far end and
        bit rate from amdsmi_get_link_metrics, matched by link index."""
        states = _get(self.ask("amdsmi_get_gpu_xgmi_link_status"), "status")
        metrics = self.ask("amdsmi_get_link_metrics")
        listed = _get(metrics, "links")
        per_link = listed if isinstance(listed, list) else []
        wanted = _count(_get(metrics, "num_links"))
        if wanted:
            per_link = per_link[:wanted]
        if not isinstance(states, list) and not per_link:
            return None
        xgmi = self.enum("AmdSmiLinkType", "AMDSMI_LINK_TYPE_XGMI")
        links = []
        for index in range(len(states) if isinstance(states, list) else len(per_link)):
            metric = per_link[index] if index < len(per_link) else {}
            kind = _count(_get(metric, "link_type"))
            if not isinstance(states, list) and xgmi is not None and kind != xgmi:
                continue
            state = _XGMI_STATES.get(str(states[index])) if isinstance(states, list) else None
            links.append({"kind": "xgmi", "index": index, "state": state,
                          "remote": _address(_get(metric, "bdf")), "errors": {},
                          "speed_gbps": number(_get(metric, "bit_rate"))})
        return links

    def _xgmi_error(self) -> str | None:
        status = _count(self.ask("amdsmi_gpu_xgmi_error_status"))
        if status is None:
            return None
        kinds = getattr(self.lib, "AmdSmiXgmiStatus", None)
        for member in kinds or ():
            if int(member) == status:
                return str(member.name).lower()
        return str(status)

    def _throttle(self) -> list[str] | None:
        """The limits active now: amdsmi_get_violation_status (ROCm 6.3 on, MI300), else
        the SMU throttler bits of gpu_metrics where the binding still gives the mask."""
        status = self.ask("amdsmi_get_violation_status")
        if isinstance(status, Mapping):
            # Its active_* flags, the ones telemetry reads (VIOLATION_FIELDS), in its order.
            flags = {field.removeprefix("active_"): violation_flag(status.get(field))
                     for field in VIOLATION_FIELDS}
            if any(flag is not None for flag in flags.values()):
                return [name for name, flag in flags.items() if flag]
        bits = _get(self.ask("amdsmi_get_gpu_metrics_info"), "indep_throttle_status")
        if isinstance(bits, bool) or not isinstance(bits, int) or bits == 0xFFFFFFFFFFFFFFFF:
            return None
        return [SMU_THROTTLE_NAMES.get(bit, f"bit{bit}")
                for bit in range(64) if bits >> bit & 1]


def _get(info: object, key: str) -> Any:
    return info.get(key) if isinstance(info, Mapping) else None


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    if not isinstance(value, str):
        return None
    value = value.strip()
    return value if value and value != "N/A" else None


def _count(value: object) -> int | None:
    """A count or enum value; None for "N/A", booleans and sentinels."""
    found = number(value)
    return None if found is None else int(found)


def _gts(value: float | None) -> float | None:
    if value is None or value <= 0:
        return None
    return value / 1000.0 if value >= 1000 else value


def _address(value: object) -> str | None:
    text = _text(value)
    return None if text is None or text == _NO_ADDRESS else text.lower()


def _ecc_count(block: str, found: Mapping[str, Any]) -> Raw:
    return {"block": block, "scope": None,
            "correctable": _count(found.get("correctable_count")),
            "uncorrectable": _count(found.get("uncorrectable_count")),
            "deferred": _count(found.get("deferred_count"))}
