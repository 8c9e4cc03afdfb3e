"""GPU hardware health: what AMD's amdsmi and NVIDIA's NVML say about each GPU's memory
errors, retired memory, PCIe link, GPU-to-GPU links, clock slowdowns and versions, and the
pass/warn/fail findings drawn from them, in the spirit of DCGM's diagnostics and AMD's
ROCm Validation Suite.

The model is vendor-neutral: `gpu_amd` and `gpu_nvidia` turn the bindings' answers into
the plain-data shape of `GpuHealth.to_dict()`, so a reading can be stored, compared across
nodes and judged again later. Every field is None where the library did not answer: one
failing call costs that one field, never the reading.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from accelbench.benchmarks.health import gpu_amd, gpu_nvidia
from accelbench.benchmarks.health.findings import FAIL, PASS, WARN, Finding, judged
from accelbench.env.telemetry.guard import Importer
from accelbench.env.telemetry.throttle import POWER_SLOWDOWNS, is_slowdown

T = TypeVar("T")

CHECKS = ("ecc", "pages", "pcie", "links", "throttle", "versions")

# Utilisation at or above which a GPU counts as under load when its PCIe generation is
# judged: GPUs lower the link generation when idle to save power (NVML documents that
# the current generation may read lower then), so only a busy GPU's generation can fail.
LOAD_PCT = 50.0

ECC_RULE = ("an uncorrectable or deferred ECC error in the current count (NVML's volatile "
            "count, amdsmi's) fails; corrected errors in it, uncorrectable errors in NVML's "
            "lifetime (aggregate) count, and ECC off on a GPU that supports it warn; lifetime "
            "corrected errors are recorded, not judged")
PAGES_RULE = ("an unrepairable (unreservable) bad page or a failed row remapping fails; "
              "pages pending retirement and remappings pending a GPU reset warn")
PCIE_RULE = ("a link narrower than its maximum width fails; a generation below the maximum "
             f"fails under load (utilisation >= {LOAD_PCT:g} %) and warns otherwise, as an "
             "idle GPU may lower it to save power, and so does an AMD GPU's narrower link "
             "at a lowered generation (its power management lowers both); PCIe replays and "
             "NAKs warn")
LINK_DOWN_RULE = ("a link that is down while the same link is up on another GPU of the node "
                  "fails (a missing link)")
LINK_COUNT_RULE = ("a GPU with fewer active links than another GPU of the node fails, counting "
                   "a link whose state is not reported (N/A) as possibly up")
LINK_ERROR_RULE = "link replay, recovery or CRC errors, or an XGMI error status, warn"
THROTTLE_RULE = ("a thermal or hardware slowdown (power brake) active now warns; idle, power "
                 "cap and clock-setting reasons are recorded, not judged")
VERSIONS_RULE = "a driver or firmware version that differs between GPUs of the node warns"

_LINK_NAMES = {"xgmi": "XGMI", "nvlink": "NVLink"}

_DOWN_CODES = {"xgmi": "ACCEL_XGMI_LINK_DOWN", "nvlink": "ACCEL_NVLINK_DOWN"}


# ------------------------------------------------------------------------------ model


@dataclass(frozen=True)
class EccCount:
    """ECC error counts of one block (AMD: UMC, GFX, ...; NVIDIA: DRAM, SRAM, ...) or of
    the whole GPU ("total"). `scope` is NVML's "volatile" (since the driver loaded) or
    "aggregate" (lifetime); None for amdsmi, whose counts are since the driver loaded."""

    block: str
    scope: str | None = None
    correctable: int | None = None
    uncorrectable: int | None = None
    deferred: int | None = None  # AMD: errors deferred to the consumer (poisoned data)

    @property
    def label(self) -> str:
        return self.block if self.scope is None else f"{self.block}/{self.scope}"

    def to_dict(self) -> dict[str, Any]:
        return {"block": self.block, "scope": self.scope, "correctable": self.correctable,
                "uncorrectable": self.uncorrectable, "deferred": self.deferred}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EccCount:
        return cls(str(data.get("block")), _str(data.get("scope")), _int(data.get("correctable")),
                   _int(data.get("uncorrectable")), _int(data.get("deferred")))


@dataclass(frozen=True)
class MemoryPages:
    """Retired memory. AMD's bad-page list gives `retired` (reserved), `pending` and
    `unrepairable` (unreservable) page counts; NVIDIA gives retired pages with a pending
    flag (before Ampere) and row remapping (Ampere on)."""

    retired: int | None = None
    pending: int | None = None
    unrepairable: int | None = None
    retirement_pending: bool | None = None
    rows_corrected: int | None = None
    rows_uncorrected: int | None = None
    remap_pending: bool | None = None
    remap_failed: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"retired": self.retired, "pending": self.pending,
                "unrepairable": self.unrepairable, "retirement_pending": self.retirement_pending,
                "rows_corrected": self.rows_corrected, "rows_uncorrected": self.rows_uncorrected,
                "remap_pending": self.remap_pending, "remap_failed": self.remap_failed}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryPages:
        return cls(_int(data.get("retired")), _int(data.get("pending")),
                   _int(data.get("unrepairable")), _bool(data.get("retirement_pending")),
                   _int(data.get("rows_corrected")), _int(data.get("rows_uncorrected")),
                   _bool(data.get("remap_pending")), _bool(data.get("remap_failed")))


@dataclass(frozen=True)
class PcieLink:
    """The GPU's PCIe link now and at most. `gen_max` and `width_max` are the most the link
    can run: NVML's for the device in its slot, amdsmi's for the device. `gen_gpu_max` is
    the GPU's own maximum where NVML gives it apart. Counters are cumulative."""

    gen: int | None = None
    gen_max: int | None = None
    gen_gpu_max: int | None = None
    width: int | None = None
    width_max: int | None = None
    speed_gts: float | None = None
    speed_max_gts: float | None = None
    replay: int | None = None
    replay_rollover: int | None = None
    nak_sent: int | None = None
    nak_received: int | None = None
    l0_to_recovery: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"gen": self.gen, "gen_max": self.gen_max, "gen_gpu_max": self.gen_gpu_max,
                "width": self.width, "width_max": self.width_max, "speed_gts": self.speed_gts,
                "speed_max_gts": self.speed_max_gts, "replay": self.replay,
                "replay_rollover": self.replay_rollover, "nak_sent": self.nak_sent,
                "nak_received": self.nak_received, "l0_to_recovery": self.l0_to_recovery}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PcieLink:
        return cls(_int(data.get("gen")), _int(data.get("gen_max")),
                   _int(data.get("gen_gpu_max")), _int(data.get("width")),
                   _int(data.get("width_max")), _float(data.get("speed_gts")),
                   _float(data.get("speed_max_gts")), _int(data.get("replay")),
                   _int(data.get("replay_rollover")), _int(data.get("nak_sent")),
                   _int(data.get("nak_received")), _int(data.get("l0_to_recovery")))


@dataclass(frozen=True)
class GpuLink:
    """One GPU-to-GPU link: XGMI on AMD, NVLink on NVIDIA. `state` is "up", "down" or
    "disabled" (amdsmi's unused link); `remote` the far end's PCI address where given;
    `errors` NVLink's replay, recovery, crc_flit and crc_data counters."""

    kind: str
    index: int
    state: str | None = None
    remote: str | None = None
    errors: Mapping[str, int] = field(default_factory=dict)
    speed_gbps: float | None = None

    @property
    def name(self) -> str:
        return f"{self.kind}{self.index}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "index": self.index, "state": self.state,
                "remote": self.remote, "errors": dict(self.errors),
                "speed_gbps": self.speed_gbps}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GpuLink:
        errors = data.get("errors") or {}
        counts = {str(k): n for k, v in errors.items() if (n := _int(v)) is not None}
        return cls(str(data.get("kind")), _int(data.get("index")) or 0, _str(data.get("state")),
                   _str(data.get("remote")), counts, _float(data.get("speed_gbps")))


@dataclass(frozen=True)
class GpuHealth:
    """One GPU's health reading. `bus_id` is the PCI address as sysfs spells it
    ("0000:c1:00.0"); `throttle` the clock-event reasons active at the reading;
    `utilization_pct` how busy the GPU was then, which decides whether a lowered PCIe
    generation can be the idle power state."""

    index: int
    vendor: str
    name: str | None = None
    bus_id: str | None = None
    serial: str | None = None
    driver_version: str | None = None
    firmware: Mapping[str, str] | None = None
    ecc_enabled: bool | None = None
    ecc_supported: bool | None = None
    ecc: tuple[EccCount, ...] | None = None
    pages: MemoryPages | None = None
    pcie: PcieLink | None = None
    links: tuple[GpuLink, ...] | None = None
    link_error_status: str | None = None  # amdsmi's XGMI error status: "no_errors", ...
    throttle: tuple[str, ...] | None = None
    utilization_pct: float | None = None

    @property
    def subject(self) -> str:
        return f"gpu{self.index}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index, "vendor": self.vendor, "name": self.name,
            "bus_id": self.bus_id, "serial": self.serial, "driver_version": self.driver_version,
            "firmware": None if self.firmware is None else dict(self.firmware),
            "ecc_enabled": self.ecc_enabled, "ecc_supported": self.ecc_supported,
            "ecc": None if self.ecc is None else [c.to_dict() for c in self.ecc],
            "pages": None if self.pages is None else self.pages.to_dict(),
            "pcie": None if self.pcie is None else self.pcie.to_dict(),
            "links": None if self.links is None else [link.to_dict() for link in self.links],
            "link_error_status": self.link_error_status,
            "throttle": None if self.throttle is None else list(self.throttle),
            "utilization_pct": self.utilization_pct,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GpuHealth:
        """A reading from `to_dict()`'s shape; absent or ill-typed values become None."""
        firmware = data.get("firmware")
        return cls(
            index=_int(data.get("index")) or 0,
            vendor=str(data.get("vendor")),
            name=_str(data.get("name")),
            bus_id=_str(data.get("bus_id")),
            serial=_str(data.get("serial")),
            driver_version=_str(data.get("driver_version")),
            firmware=({str(k): str(v) for k, v in firmware.items()}
                      if isinstance(firmware, Mapping) else None),
            ecc_enabled=_bool(data.get("ecc_enabled")),
            ecc_supported=_bool(data.get("ecc_supported")),
            ecc=_many(data.get("ecc"), EccCount.from_dict),
            pages=_one(data.get("pages"), MemoryPages.from_dict),
            pcie=_one(data.get("pcie"), PcieLink.from_dict),
            links=_many(data.get("links"), GpuLink.from_dict),
            link_error_status=_str(data.get("link_error_status")),
            throttle=(tuple(str(n) for n in data["throttle"])
                      if isinstance(data.get("throttle"), list) else None),
            utilization_pct=_float(data.get("utilization_pct")),
        )


@dataclass(frozen=True)
class GpuRead:
    """The GPUs one library read. `missing` says in one line why none could be read."""

    source: str
    gpus: tuple[GpuHealth, ...]
    missing: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "gpus": [g.to_dict() for g in self.gpus],
                "missing": self.missing}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GpuRead:
        gpus = data.get("gpus") or []
        return cls(str(data.get("source")), tuple(GpuHealth.from_dict(g) for g in gpus),
                   _str(data.get("missing")))


# ------------------------------------------------------------------------------ reading

VendorReader = Callable[[Importer], tuple[str, list[dict[str, Any]], str | None]]
_READERS: Mapping[str, VendorReader] = {"amd": gpu_amd.read, "nvidia": gpu_nvidia.read}


def read_gpus(vendor: str | None = None, *,
              importer: Importer = importlib.import_module) -> GpuRead:
    """Every GPU's health through the vendor's library: "amd" reads amdsmi, "nvidia"
    pynvml, None tries amdsmi then pynvml and keeps the first that finds GPUs. The
    bindings are imported here, not before, so a machine without them still runs."""
    if vendor is not None and vendor not in _READERS:
        raise ValueError(f"unknown GPU vendor {vendor!r} (expected 'amd' or 'nvidia')")
    sources, reasons = [], []
    for name in (vendor,) if vendor else tuple(_READERS):
        source, raw, missing = _READERS[name](importer)
        if raw:
            return GpuRead(source, tuple(GpuHealth.from_dict(g) for g in raw), None)
        sources.append(source)
        reasons.append(missing or f"{source} found no GPUs")
    return GpuRead(", ".join(sources), (), "; ".join(reasons))


# ------------------------------------------------------------------------------ rules


def findings(read: GpuRead) -> dict[str, list[Finding]]:
    """The findings of each check (`CHECKS`) over the GPUs read; empty lists for none."""
    gpus = read.gpus
    return {
        "ecc": [_ecc(g) for g in gpus],
        "pages": [_pages(g) for g in gpus],
        "pcie": [_pcie(g) for g in gpus],
        "links": _links(gpus),
        "throttle": [_throttle(g) for g in gpus],
        "versions": _versions(gpus),
    }


Problem = tuple[str, str, str]  # (level, what was found, its reason code)


def _combined(subject: str, rule: str, problems: Sequence[Problem], fine: str,
              reading: Mapping[str, Any]) -> Finding:
    """One finding at the worst problem's level, naming every problem, with the code of
    the first problem at that level; PASS with `fine`."""
    if not problems:
        return Finding(subject, PASS, rule, fine, dict(reading))
    level = FAIL if any(lvl == FAIL for lvl, _, _ in problems) else WARN
    code = next(c for lvl, _, c in problems if lvl == level)
    return Finding(subject, level, rule, "; ".join(text for _, text, _ in problems),
                   dict(reading), code)


def _with_errors(counts: Iterable[EccCount], kind: str) -> dict[str, int]:
    """Blocks whose `kind` count is above zero; the GPU total only where no block says."""
    found: dict[str, int] = {}
    totals: dict[str, int] = {}
    for count in counts:
        value = getattr(count, kind)
        if value:
            (totals if count.block == "total" else found)[count.block] = value
    return found or totals


def _named(blocks: Mapping[str, int]) -> str:
    return ", ".join(f"{block} ({n})" for block, n in blocks.items())


def _ecc(gpu: GpuHealth) -> Finding:
    counts = gpu.ecc or ()
    now = [c for c in counts if c.scope != "aggregate"]
    lifetime = [c for c in counts if c.scope == "aggregate"]
    problems: list[Problem] = []
    uncorrectable = _with_errors(now, "uncorrectable")
    if uncorrectable:
        problems.append((FAIL, f"uncorrectable ECC errors in {_named(uncorrectable)}",
                         "ACCEL_ECC_DBE"))
    deferred = _with_errors(now, "deferred")
    if deferred:
        problems.append((FAIL, f"deferred ECC errors in {_named(deferred)}", "ACCEL_ECC_DBE"))
    corrected = _with_errors(now, "correctable")
    if corrected:
        problems.append((WARN, f"corrected ECC errors in {_named(corrected)}", "ACCEL_ECC_SBE"))
    past = _with_errors(lifetime, "uncorrectable")
    if past and not uncorrectable:
        problems.append((WARN, f"uncorrectable ECC errors in the lifetime count: {_named(past)}",
                         "ACCEL_ECC_LIFETIME"))
    if gpu.ecc_enabled is False and gpu.ecc_supported:
        problems.append((WARN, "ECC is off on a GPU that supports it", "ACCEL_ECC_DISABLED"))
    reading = {"ecc_enabled": gpu.ecc_enabled, "ecc_supported": gpu.ecc_supported,
               "counts": {c.label: {"correctable": c.correctable,
                                    "uncorrectable": c.uncorrectable,
                                    "deferred": c.deferred} for c in counts}}
    return _combined(gpu.subject, ECC_RULE, problems, _ecc_recorded(counts, lifetime), reading)


def _ecc_recorded(counts: Sequence[EccCount], lifetime: Sequence[EccCount]) -> str:
    if not counts:
        return "ECC counts not read"
    corrected = _with_errors(lifetime, "correctable")
    said = f"no ECC errors in the current count ({len(counts) - len(lifetime)} counts read)"
    return said + (f"; lifetime corrected errors in {_named(corrected)}" if corrected else "")


def _pages(gpu: GpuHealth) -> Finding:
    pages = gpu.pages
    if pages is None:
        return Finding(gpu.subject, PASS, PAGES_RULE, "retired memory not read")
    problems: list[Problem] = []
    if pages.unrepairable:
        problems.append((FAIL, f"{pages.unrepairable} bad pages could not be retired "
                               "(unreservable)", "ACCEL_RETIRED_PAGES"))
    if pages.remap_failed:
        problems.append((FAIL, "a row remapping failed", "ACCEL_ROW_REMAP_FAILED"))
    if pages.pending:
        problems.append((WARN, f"{pages.pending} bad pages pending retirement",
                         "ACCEL_PAGES_PENDING"))
    if pages.remap_pending:
        problems.append((WARN, "a row remapping is pending: reset the GPU",
                         "ACCEL_PAGES_PENDING"))
    if pages.retirement_pending:
        problems.append((WARN, "retired pages are pending: reset the GPU",
                         "ACCEL_PAGES_PENDING"))
    return _combined(gpu.subject, PAGES_RULE, problems, _pages_recorded(pages),
                     pages.to_dict())


def _pages_recorded(pages: MemoryPages) -> str:
    said = []
    if pages.retired is not None:
        said.append(f"{pages.retired} pages retired")
    if pages.rows_corrected is not None or pages.rows_uncorrected is not None:
        said.append(f"{pages.rows_corrected or 0} rows remapped for corrected and "
                    f"{pages.rows_uncorrected or 0} for uncorrected errors")
    return ("; ".join(said) or "no retired memory reported") + ", none pending or failed"


def _pcie(gpu: GpuHealth) -> Finding:
    link = gpu.pcie
    if link is None:
        return Finding(gpu.subject, PASS, PCIE_RULE, "PCIe link not read")
    problems = _lanes(link, gpu)
    if link.replay:
        problems.append((WARN, f"{link.replay} PCIe replays", "ACCEL_PCIE_REPLAY"))
    if link.nak_sent or link.nak_received:
        problems.append((WARN, f"PCIe NAKs sent {link.nak_sent or 0}, "
                               f"received {link.nak_received or 0}", "ACCEL_PCIE_REPLAY"))
    reading = {**link.to_dict(), "utilization_pct": gpu.utilization_pct}
    return _combined(gpu.subject, PCIE_RULE, problems, _pcie_state(link), reading)


def _lanes(link: PcieLink, gpu: GpuHealth) -> list[Problem]:
    """The link's width and generation against their maxima. amdsmi's pcie_metric is the
    link as the GPU's power management set it now, and an idle AMD GPU lowers its lanes
    with its generation: a narrower link at a lowered generation is judged as the
    generation is, by the load."""
    gen, gen_max, busy = link.gen, link.gen_max, gpu.utilization_pct
    lowered = gen is not None and gen_max is not None and gen < gen_max
    narrow = (link.width is not None and link.width_max is not None
              and link.width < link.width_max)
    lanes = f"x{link.width} of x{link.width_max} lanes"
    if narrow and lowered and gpu.vendor == "amd":
        level, said, _ = _generation(gen or 0, gen_max or 0, busy)
        return [(level, f"{lanes} at {said}", "ACCEL_PCIE_WIDTH")]
    out: list[Problem] = [(FAIL, lanes, "ACCEL_PCIE_WIDTH")] if narrow else []
    if lowered:
        out.append(_generation(gen or 0, gen_max or 0, busy))
    return out


def _generation(gen: int, gen_max: int, busy: float | None) -> Problem:
    if busy is not None and busy >= LOAD_PCT:
        return FAIL, f"Gen{gen} of Gen{gen_max} under load ({busy:g} % busy)", "ACCEL_PCIE_SPEED"
    at = "utilisation unknown" if busy is None else f"{busy:g} % busy"
    return WARN, (f"Gen{gen} of Gen{gen_max} ({at}): may be the idle power state; "
                  "run under load"), "ACCEL_PCIE_SPEED"


def _pcie_state(link: PcieLink) -> str:
    def said(value: int | None) -> str:
        return "?" if value is None else str(value)

    return (f"x{said(link.width)} of x{said(link.width_max)}, "
            f"Gen{said(link.gen)} of Gen{said(link.gen_max)}")


def _links(gpus: Sequence[GpuHealth]) -> list[Finding]:
    """A link's state None is N/A, not down: on a partitioned GPU (DPX, QPX, CPX) the
    XGMI states are the device's, seen by its primary compute partition, and the other
    partitions may read N/A (amd-smi xgmi --link-status: "N/A = Not supported")."""
    read = [g for g in gpus if g.links is not None]
    active = {g.index: sum(link.state == "up" for link in g.links or ()) for g in read}
    most = max(active.values(), default=0)
    up_on: dict[tuple[str, int], list[str]] = {}
    for gpu in read:
        for link in gpu.links or ():
            if link.state == "up":
                up_on.setdefault((link.kind, link.index), []).append(gpu.subject)
    found: list[Finding] = []
    for gpu in gpus:
        if gpu.links is None:
            found.append(Finding(gpu.subject, PASS, LINK_COUNT_RULE, "links not read"))
            continue
        found.append(_link_count(gpu, active[gpu.index], most))
        for link in gpu.links:
            found.extend(_link_findings(gpu, link, up_on))
        if gpu.link_error_status not in (None, "no_errors"):
            found.append(Finding(f"{gpu.subject} xgmi", WARN, LINK_ERROR_RULE,
                                 f"XGMI error status {gpu.link_error_status}",
                                 {"link_error_status": gpu.link_error_status},
                                 "ACCEL_LINK_ERRORS"))
    return found


def _link_count(gpu: GpuHealth, active: int, most: int) -> Finding:
    links = gpu.links or ()
    states = {link.name: link.state for link in links}
    wired = [link for link in links if link.state != "disabled"]
    unknown = sum(link.state is None for link in wired)
    # Fewer only when even the links whose state is N/A could not make up the count.
    fewer = active + unknown < most
    if not wired:
        message = "no GPU-to-GPU links reported"
    else:
        kind = _LINK_NAMES.get(wired[0].kind, wired[0].kind)
        if unknown == len(wired):
            message = f"{len(wired)} {kind} links, states not reported (N/A)"
        else:
            message = f"{active} of {len(wired)} {kind} links up"
            if unknown:
                message += f", {unknown} not reported (N/A)"
    if fewer:
        message += f", where another GPU of the node has {most}"
    return judged(gpu.subject, LINK_COUNT_RULE, fewer, message,
                  {"active": active, "not_reported": unknown, "node_most": most,
                   "links": states},
                  code=_down_code(wired[0].kind if wired else ""))


def _link_findings(gpu: GpuHealth, link: GpuLink,
                   up_on: Mapping[tuple[str, int], list[str]]) -> list[Finding]:
    subject = f"{gpu.subject} {link.name}"
    kind = _LINK_NAMES.get(link.kind, link.kind)
    found = []
    peers = [s for s in up_on.get((link.kind, link.index), []) if s != gpu.subject]
    if link.state == "down" and peers:
        found.append(judged(
            subject, LINK_DOWN_RULE, True,
            f"missing {kind} link: {link.name} is down, up on {', '.join(peers)}",
            {**link.to_dict(), "up_on": peers}, code=_down_code(link.kind)))
    errors = {name: n for name, n in link.errors.items() if n > 0}
    if errors:
        counted = ", ".join(f"{name} {n}" for name, n in errors.items())
        found.append(judged(subject, LINK_ERROR_RULE, True, f"{kind} errors: {counted}",
                            link.to_dict(), code="ACCEL_LINK_ERRORS", warn_only=True))
    return found


def _down_code(kind: str) -> str:
    """The reason code of a missing link of `kind`."""
    return _DOWN_CODES.get(kind, "ACCEL_LINK_DOWN")


def _throttle(gpu: GpuHealth) -> Finding:
    if gpu.throttle is None:
        return Finding(gpu.subject, PASS, THROTTLE_RULE, "clock-event reasons not read")
    slow = [r for r in gpu.throttle if is_slowdown(r)]
    others = [r for r in gpu.throttle if not is_slowdown(r)]
    reading = {"active": list(gpu.throttle)}
    if slow:
        power = all(r in POWER_SLOWDOWNS for r in slow)
        return judged(gpu.subject, THROTTLE_RULE, True, f"{', '.join(slow)} active now",
                      reading, code="ACCEL_THROTTLE_POWER" if power else
                      "ACCEL_THROTTLE_THERMAL", warn_only=True)
    recorded = f" ({', '.join(others)} active, not judged)" if others else ""
    return judged(gpu.subject, THROTTLE_RULE, False,
                  f"no thermal or hardware slowdown active{recorded}", reading,
                  code="ACCEL_THROTTLE_THERMAL")


def _versions(gpus: Sequence[GpuHealth]) -> list[Finding]:
    items: dict[str, dict[str, str]] = {}
    for gpu in gpus:
        if gpu.driver_version:
            items.setdefault("driver", {})[gpu.subject] = gpu.driver_version
        for name, version in (gpu.firmware or {}).items():
            items.setdefault(f"firmware {name}", {})[gpu.subject] = version
    return [_version(item, by_gpu) for item, by_gpu in items.items()]


def _version(item: str, by_gpu: Mapping[str, str]) -> Finding:
    holders: dict[str, list[str]] = {}
    for subject, version in by_gpu.items():
        holders.setdefault(version, []).append(subject)
    if len(holders) == 1:
        version, subjects = next(iter(holders.items()))
        message = f"{item} {version} on all {len(subjects)} GPUs"
    else:
        message = f"{item} differs: " + "; ".join(
            f"{version} on {', '.join(subjects)}" for version, subjects in holders.items())
    return judged(item, VERSIONS_RULE, len(holders) > 1, message, dict(by_gpu),
                  code="ACCEL_VERSION_MISMATCH", warn_only=True)


# ------------------------------------------------------------------------------ values


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value)


def _float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _bool(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _one(value: object, build: Callable[[Mapping[str, Any]], T]) -> T | None:
    return build(value) if isinstance(value, Mapping) else None


def _many(value: object, build: Callable[[Mapping[str, Any]], T]) -> tuple[T, ...] | None:
    if not isinstance(value, list):
        return None
    return tuple(build(item) for item in value if isinstance(item, Mapping))
