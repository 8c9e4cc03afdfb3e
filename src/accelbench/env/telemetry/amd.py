"""AMD telemetry through the amdsmi library, and through `amd-smi metric --json` when the
library is not importable (ROCm installs the CLI system-wide but the Python package only
into its own interpreter's site-packages).

Packages. An MI250 or MI250X is two GCDs in one package, and PyTorch and amdsmi see each
GCD as a device; the driver reports the package's power and energy on the primary GCD
only and 0 on the other (amdgpu's aldebaran code: "valid power data is available only
from primary die"; amd-smi shows N/A or 0 there). A compute partition of an MI300-class
GPU likewise shares its package's power. So the power and energy of such a device are
read from whichever device of its package reports them and recorded as the package's,
naming the devices that share it (Series.shared_by), never as the device's own: summed or
credited per device they would count the package once for each of its devices, and read
from a secondary GCD they would be zero. The devices of one package are found as those
of an MI250-class product (amdsmi's market name) with the same board serial, and
otherwise as those on the same PCI device (domain, bus and device; partitions differ in
function only). Where the other GCD of an MI250 cannot be found, the readings are still
marked as the package's, with that GCD unnamed. The amd-smi CLI source, the fallback when
the library is not importable, does not do this: it reads one GPU per call and names no
package, so on a secondary GCD its power is that GCD's 0 or N/A.

APUs. On an APU the socket power and energy amdsmi reports are the whole APU's, CPU cores
included: the MI300A's socket power is its whole socket's, CPU chiplets and all, and the
gpu_metrics of a Ryzen processor's GPU (Strix Halo's Radeon 8060S among them) give
average_socket_power as "power used for PPT/STAPM [APU+dGPU]" (gpu_metrics_v3_0 in the
kernel's kgd_pp_interface.h). So they are marked as shared with the APU's CPU cores, as a
package's are with its devices. amdsmi gives a GPU no APU flag (amdsmi.h declares the
processor type AMDSMI_PROCESSOR_TYPE_AMD_APU, but every GPU is made an AMD_GPU), so the
APU is known from amdsmi_get_gpu_asic_info: a market name accelbench identifies as an APU
(core.product), the MI300A's PCI device ID (0x74A0 in amdgpu.ids) where the name is not
one it knows, or an LLVM target of which every product is an APU (gfx1151, Strix Halo;
gfx942 is the MI300X's too, so it needs the name or the ID).

Energy counter width. amdsmi_get_energy_count returns a 64-bit field, but what the SMU
accumulates into it is 64 bits wide on MI200 and MI300 (aldebaran joins two 32-bit
halves; MI300's SocketEnergyAcc is 64-bit) and 32 bits wide on MI100 and the Navi parts
(their SMU metrics' EnergyAccumulator is a uint32). The width is not reported, so it is
judged from the readings: a counter that has read 2**32 ticks or more is 64 bits wide,
and one that has not is taken to wrap at 2**32 ticks (65.5 kJ at 15.3 µJ a tick,
a few minutes at full power). A 64-bit counter that is still below 2**32 ticks and then
goes backwards (a driver reload) is thus corrected as a wrap that was not one; the
energy check against the integrated power then finds it suspect. The amd-smi CLI prints
only joules, with no resolution to derive a width from, so its counter has no wrap value.
"""

from __future__ import annotations

import contextlib
import importlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.core import product
from accelbench.core.device import DeviceInfo
from accelbench.core.telemetry import (
    ENERGY_J,
    GFX_CLOCK_MHZ,
    MEM_CLOCK_MHZ,
    MEM_USED_B,
    POWER_AVG_S,
    POWER_W,
    TEMP_C,
    THROTTLE,
    UTIL_PCT,
)
from accelbench.env.bindings import quietly
from accelbench.env.telemetry.guard import (
    Guard,
    Importer,
    SourceUnavailable,
    load_binding,
    number,
    vendor_errors,
)
from accelbench.env.telemetry.throttle import AMD_SMI_THROTTLED, active_reasons
from accelbench.env.vendor_tools import TIMED_OUT, run_tool

# gpu_metrics' indep_throttle_status: the SMU_THROTTLER_* bits of the kernel's
# drivers/gpu/drm/amd/pm/swsmu/inc/amdgpu_smu.h, the same on every ASIC (throttle_status
# itself is ASIC-specific). A bit set is a throttler active at that reading. amdsmi's Python
# binding gives the mask as read up to ROCm 6.0; later ones give only whether any bit is
# set (amdsmi_interface.py passes indep_throttle_status through bool()), which names no
# reason and is not read: MI300 and later answer amdsmi_get_violation_status instead.
SMU_THROTTLE_NAMES: Mapping[int, str] = {
    0: "PPT0", 1: "PPT1", 2: "PPT2", 3: "PPT3", 4: "SPL", 5: "FPPT", 6: "SPPT",
    7: "SPPT_APU", 16: "TDC_GFX", 17: "TDC_SOC", 18: "TDC_MEM", 19: "TDC_VDD",
    20: "TDC_CVIP", 21: "EDC_CPU", 22: "EDC_GFX", 23: "APCC", 32: "TEMP_GPU",
    33: "TEMP_CORE", 34: "TEMP_MEM", 35: "TEMP_EDGE", 36: "TEMP_HOTSPOT", 37: "TEMP_SOC",
    38: "TEMP_VR_GFX", 39: "TEMP_VR_SOC", 40: "TEMP_VR_MEM0", 41: "TEMP_VR_MEM1",
    42: "TEMP_LIQUID0", 43: "TEMP_LIQUID1", 44: "VRHOT0", 45: "VRHOT1",
    46: "PROCHOT_CPU", 47: "PROCHOT_GFX", 56: "PPM", 57: "FIT",
}  # fmt: skip

# MI300 and later report no throttle mask in gpu_metrics; amdsmi_get_violation_status
# (ROCm 6.3+) says instead which limits are active now, each active_* flag 1 when active,
# 0 when not and all ones (amdsmi_interface.py: "N/A") when the part does not report it.
# From gpu_metrics 1.8 on, the GFX clock held below the host's limit is told per
# partition and XCC, for power, heat and in all (2D arrays, [XCP][XCC]), in place of the
# one flag before: active when any partition's is. Their bits in THROTTLE:
VIOLATION_FIELDS = (
    "active_ppt_pwr", "active_socket_thrm", "active_prochot_thrm", "active_vr_thrm",
    "active_hbm_thrm", "active_gfx_clk_below_host_limit",
    "active_gfx_clk_below_host_limit_pwr", "active_gfx_clk_below_host_limit_thm",
    "active_gfx_clk_below_host_limit_total",
)  # fmt: skip
VIOLATION_NAMES: Mapping[int, str] = {
    bit: name.removeprefix("active_") for bit, name in enumerate(VIOLATION_FIELDS)
}

# amdsmi_get_energy_count's accumulator counts `counter_resolution` µJ per tick, in as
# many bits as the SMU keeps (see the module's docstring).
_WIDE_COUNTER_BITS = 64
_NARROW_COUNTER_BITS = 32

# amdsmi_get_power_info's keys, in the order read, with the seconds each is averaged over:
# MI300 reports the instantaneous socket power, MI200 a 1 s average; "socket_power" is the
# older name, of either.
_POWER_KEYS: tuple[tuple[str, float | None], ...] = (
    ("current_socket_power", 0.0), ("socket_power", None), ("average_socket_power", 1.0),
)

# Market names of the products whose package is two GCDs, each its own device.
_TWO_GCD_MARKETS = ("MI250",)

# PCI device IDs of APUs whose LLVM target discrete GPUs share (amdgpu.ids: 74A0 is the
# AMD Instinct MI300A; 74A1, the MI300X, is gfx942 too).
_APU_DEVICE_IDS = {0x74A0: product.MI300A}
# LLVM targets of which every product accelbench knows is an APU.
_APU_TARGETS = (frozenset(s.arch for s in product.SIGNATURES if s.unified_memory)
                - frozenset(s.arch for s in product.SIGNATURES if not s.unified_memory))


class AmdSmiSource:
    """One AMD GPU through amdsmi; `read()` gives None for a channel whose call failed."""

    name = "amdsmi"

    def __init__(self, amdsmi: Any, handle: object, package: Package | None = None,
                 apu: Apu | None = None) -> None:
        self._lib = amdsmi
        self._handle = handle
        self._errors = vendor_errors(amdsmi, "AmdSmiException")
        self._answered = False
        self.wrap_j: dict[str, float] = {}
        # The names of the throttle bits seen active so far (the legend of this source's
        # THROTTLE channel); never the reasons the part could report but did not.
        self.throttle_names: dict[int, str] = {}
        self._reason_names: Mapping[int, str] = {}
        self._throttle: Callable[[Guard], float | None] | None = None
        self._wide_counter = False
        shared = package.devices if package is not None else ()
        if apu is not None:
            # The APU's socket power is its CPU cores' too: they share it with the GPU.
            shared = (*(shared or (apu.device,)), apu.cores)
        # The device whose power and energy are read: the package's reporting one.
        self._power_handle: object | None = package.reporter if package is not None else handle
        self.shared_by: Mapping[str, tuple[str, ...]] = (
            {POWER_W: shared, ENERGY_J: shared} if shared else {})

    @classmethod
    def open(cls, index: int, *, importer: Importer = importlib.import_module) -> AmdSmiSource:
        """amdsmi started and GPU `index` found; SourceUnavailable otherwise."""
        lib = load_binding("amdsmi", importer)
        errors = vendor_errors(lib, "AmdSmiException")
        try:
            quietly(lib.amdsmi_init)
        except errors as exc:
            raise SourceUnavailable(f"amdsmi did not start: {exc}") from exc
        try:
            handles = list(lib.amdsmi_get_processor_handles())
            handle = handles[index]
        except errors as exc:
            _shut_down(lib, errors)
            raise SourceUnavailable(f"amdsmi has no GPU {index}: {exc}") from exc
        apu_product = find_apu(lib, handle, errors)
        apu = None
        if apu_product is not None:
            bdf = Guard(errors).call(getattr(lib, "amdsmi_get_gpu_device_bdf", _no_call), handle)
            apu = Apu(apu_product, bdf if isinstance(bdf, str) else f"amdsmi GPU {index}")
        return cls(lib, handle, find_package(lib, handles, index, errors), apu)

    def read(self) -> dict[str, float | None]:
        lib, h, guard = self._lib, self._handle, Guard(self._errors)
        power, averaging = self._power(guard)
        reading = {
            POWER_W: power,
            POWER_AVG_S: averaging if power is not None else None,
            ENERGY_J: self._energy(guard),
            GFX_CLOCK_MHZ: self._clock(guard, "GFX"),
            MEM_CLOCK_MHZ: self._clock(guard, "MEM"),
            TEMP_C: self._temperature(guard),
            UTIL_PCT: _field(guard.call(lib.amdsmi_get_gpu_activity, h), "gfx_activity"),
            MEM_USED_B: self._vram_used(guard),
            THROTTLE: self._throttle_bits(guard),
        }
        self._answered = guard.settle(reading, self._answered)
        return reading

    def close(self) -> None:
        _shut_down(self._lib, self._errors)

    # -- channels

    def _power(self, guard: Guard) -> tuple[float | None, float | None]:
        """(W, seconds it is averaged over) of the device, or of its package."""
        if self._power_handle is None:
            return None, None
        return _socket_power(guard.call(self._lib.amdsmi_get_power_info, self._power_handle))

    def _energy(self, guard: Guard) -> float | None:
        if self._power_handle is None:
            return None
        count = guard.call(self._lib.amdsmi_get_energy_count, self._power_handle)
        if not isinstance(count, Mapping):
            return None
        # The accumulator was called "power" before amdsmi 6.2.1.
        ticks = number(count.get("energy_accumulator", count.get("power")))
        resolution_uj = number(count.get("counter_resolution"))
        if ticks is None or resolution_uj is None or resolution_uj <= 0:
            return None
        self._wide_counter = self._wide_counter or ticks >= 2.0**_NARROW_COUNTER_BITS
        bits = _WIDE_COUNTER_BITS if self._wide_counter else _NARROW_COUNTER_BITS
        self.wrap_j = {ENERGY_J: 2.0**bits * resolution_uj * 1e-6}
        return ticks * resolution_uj * 1e-6

    def _clock(self, guard: Guard, kind: str) -> float | None:
        clk_type = getattr(getattr(self._lib, "AmdSmiClkType", None), kind, None)
        if clk_type is None:
            return None
        info = guard.call(self._lib.amdsmi_get_clock_info, self._handle, clk_type)
        value = _field(info, "clk")  # "cur_clk" before ROCm 6.1
        return value if value is not None else _field(info, "cur_clk")

    def _temperature(self, guard: Guard) -> float | None:
        kinds = getattr(self._lib, "AmdSmiTemperatureType", None)
        metric = getattr(getattr(self._lib, "AmdSmiTemperatureMetric", None), "CURRENT", None)
        # MI300 has no edge sensor: the hotspot (junction) is the one every part has.
        for kind in ("HOTSPOT", "JUNCTION", "EDGE"):
            sensor = getattr(kinds, kind, None)
            if sensor is None or metric is None:
                continue
            value = number(guard.call(self._lib.amdsmi_get_temp_metric, self._handle, sensor,
                                      metric))
            if value is not None:
                return value
        return None

    def _vram_used(self, guard: Guard) -> float | None:
        vram = getattr(getattr(self._lib, "AmdSmiMemoryType", None), "VRAM", None)
        if vram is not None:
            used = number(guard.call(self._lib.amdsmi_get_gpu_memory_usage, self._handle, vram))
            if used is not None:
                return used
        usage = guard.call(self._lib.amdsmi_get_gpu_vram_usage, self._handle)
        mb = _field(usage, "vram_used")
        return mb * 1024 * 1024 if mb is not None else None

    def _throttle_bits(self, guard: Guard) -> float | None:
        """The throttle mask, from whichever of the two readings this part answered first;
        the names of its active bits join `throttle_names`."""
        value: float | None = None
        if self._throttle is not None:
            value = self._throttle(guard)
        else:
            for kind, names in ((self._indep_status, SMU_THROTTLE_NAMES),
                                (self._violations, VIOLATION_NAMES)):
                value = kind(guard)
                if value is not None:
                    self._throttle, self._reason_names = kind, names
                    break
        if value is not None:
            self.throttle_names.update(active_reasons(int(value), self._reason_names))
        return value

    def _indep_status(self, guard: Guard) -> float | None:
        metrics = guard.call(self._lib.amdsmi_get_gpu_metrics_info, self._handle)
        value = metrics.get("indep_throttle_status") if isinstance(metrics, Mapping) else None
        if isinstance(value, bool) or not isinstance(value, int):
            return None
        return None if value == 0xFFFFFFFFFFFFFFFF else float(value)

    def _violations(self, guard: Guard) -> float | None:
        status = guard.call(self._lib.amdsmi_get_violation_status, self._handle)
        if not isinstance(status, Mapping):
            return None
        bits, seen = 0, False
        for bit, key in enumerate(VIOLATION_FIELDS):
            flag = violation_flag(status.get(key))
            if flag is not None:
                seen = True
                bits |= (1 << bit) if flag else 0
        return float(bits) if seen else None


_NA_FLAGS = {0xFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF}


def violation_flag(value: object) -> bool | None:
    """One of amdsmi_get_violation_status's active_* values as a flag: a bool, 0 or 1, or
    an array of them per partition and XCC (any set: set); None where nothing in it is
    reported ("N/A", or an integer of all ones)."""
    if isinstance(value, (list, tuple)):
        flags = [violation_flag(item) for item in value]
        known = [flag for flag in flags if flag is not None]
        return any(known) if known else None
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value not in _NA_FLAGS:
        return bool(value)
    return None


def _socket_power(info: object) -> tuple[float | None, float | None]:
    for key, averaging in _POWER_KEYS:
        value = _field(info, key)
        if value is not None:
            return value, averaging
    return None, None


@dataclass(frozen=True)
class Package:
    """The devices that share a device's package (their PCI addresses, one name for a GCD
    that could not be found), and the handle that reports the package's power: None when
    none of them does (a secondary GCD whose primary was not found reads 0 W, which is
    not the package's power)."""

    devices: tuple[str, ...]
    reporter: object | None


def find_package(lib: Any, handles: Sequence[object], index: int,
                 errors: tuple[type[BaseException], ...]) -> Package | None:
    """The package device `index` shares with other devices; None when it has one alone
    (or when amdsmi cannot say: its readings are then taken as the device's own)."""
    guard = Guard(errors)
    get_bdf = getattr(lib, "amdsmi_get_gpu_device_bdf", None)
    get_asic = getattr(lib, "amdsmi_get_gpu_asic_info", None)
    get_board = getattr(lib, "amdsmi_get_gpu_board_info", None)
    if get_bdf is None:
        return None
    bdfs = [guard.call(get_bdf, h) for h in handles]
    address = pci_device(bdfs[index])
    market = _field_text(guard.call(get_asic, handles[index]) if get_asic else None,
                         "market_name")
    members: list[int]
    if market is not None and any(name in market for name in _TWO_GCD_MARKETS):
        serial = _board_serial(guard, get_board, handles[index])
        members = [i for i, h in enumerate(handles)
                   if serial is not None and _board_serial(guard, get_board, h) == serial]
        members = members or [index]
        gcds = 2
    elif address is not None:
        members = [i for i, bdf in enumerate(bdfs) if pci_device(bdf) == address]
        gcds = len(members)
    else:
        return None
    if gcds < 2:
        return None
    names = [str(bdfs[i]) if isinstance(bdfs[i], str) else f"amdsmi GPU {i}" for i in members]
    if len(members) < gcds:
        names.append("the other GCD of its package (not found)")
    # The member that reports the package's power: the primary GCD, the first partition.
    reporter: object | None = None
    for i in members:
        power, _ = _socket_power(guard.call(lib.amdsmi_get_power_info, handles[i]))
        if power:
            reporter = handles[i]
            break
    return Package(tuple(names), reporter)


@dataclass(frozen=True)
class Apu:
    """The APU a GPU is part of: its product (or LLVM target, where no product is known)
    and the GPU's name among the devices that share the APU's socket power."""

    product: str
    device: str  # the GPU's PCI address, or "amdsmi GPU i" where amdsmi gives none

    @property
    def cores(self) -> str:
        """The CPU cores, as one of the devices that share the socket power."""
        return f"the CPU cores of its APU ({self.product})"


def find_apu(lib: Any, handle: object, errors: tuple[type[BaseException], ...]
             ) -> str | None:
    """The product (or LLVM target) of the APU the GPU `handle` is part of, from amdsmi's
    asic info (see the module's docstring); None for a discrete GPU, or when amdsmi cannot
    say (its readings are then taken as the GPU's own)."""
    get_asic = getattr(lib, "amdsmi_get_gpu_asic_info", None)
    info = Guard(errors).call(get_asic, handle) if get_asic is not None else None
    if not isinstance(info, Mapping):
        return None
    market = _field_text(info, "market_name")
    target = _field_text(info, "target_graphics_version")
    named = product.shares_host_memory(
        DeviceInfo("cuda", None, "rocm", market or "", target, market_name=market))
    if named is not None:
        return named
    device_id = _pci_id(info.get("device_id"))
    if device_id is not None and device_id in _APU_DEVICE_IDS:
        return _APU_DEVICE_IDS[device_id]
    return target if target in _APU_TARGETS else None


def _pci_id(value: object) -> int | None:
    """amdsmi's device_id: an int in older bindings, a hex string ("0x74a0") in newer."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value, 16)
        except ValueError:
            return None
    return None


def _no_call(*args: object) -> None:
    """Stands in for a call the binding lacks."""
    raise AttributeError("not in this binding")


def pci_device(bdf: object) -> tuple[int, int, int] | None:
    """(domain, bus, device) of "dddd:bb:dd.f"; None for anything else."""
    if not isinstance(bdf, str):
        return None
    try:
        domain, bus, rest = bdf.strip().split(":")
        device = rest.split(".")[0]
        return int(domain, 16), int(bus, 16), int(device, 16)
    except ValueError:
        return None


def _field_text(info: object, key: str) -> str | None:
    value = info.get(key) if isinstance(info, Mapping) else None
    return value if isinstance(value, str) and value.strip() not in ("", "N/A") else None


def _board_serial(guard: Guard, get_board: Any, handle: object) -> str | None:
    return _field_text(guard.call(get_board, handle), "product_serial") if get_board else None


def _field(info: object, key: str) -> float | None:
    return number(info.get(key)) if isinstance(info, Mapping) else None


def _shut_down(lib: Any, errors: tuple[type[BaseException], ...]) -> None:
    with contextlib.suppress(*errors):
        lib.amdsmi_shut_down()


# ------------------------------------------------------------------------ amd-smi CLI

CliRunner = Callable[[Sequence[str], float], "str | None"]

# amd-smi loads the whole library and enumerates every GPU per call: 0.3-1 s on an
# 8-GPU MI300X node, so this source suits intervals of a second or more.
CLI_TIMEOUT_S = 5.0


def run_cli(argv: Sequence[str], timeout: float) -> str | None:
    """stdout of the tool, None when it is absent or fails; TimeoutError when it hangs,
    so the sampler ends this source rather than block every tick for `timeout`."""
    run = run_tool(argv, timeout)
    if run.problem == TIMED_OUT:
        raise TimeoutError(f"{' '.join(argv)} did not answer within {timeout:g} s")
    return run.stdout


class AmdSmiCliSource:
    """One AMD GPU through `amd-smi metric --json`, parsed leniently (its JSON changed
    shape between ROCm releases: a bare list, then {"gpu_data": [...]})."""

    name = "amd-smi"

    def __init__(self, index: int, runner: CliRunner = run_cli,
                 timeout_s: float = CLI_TIMEOUT_S) -> None:
        self.index = index
        # Named once it was active, as the library source's bits are.
        self.throttle_names: dict[int, str] = {}
        self._runner = runner
        self._timeout_s = timeout_s
        self._argv = ("amd-smi", "metric", "--json", "-g", str(index))

    @classmethod
    def open(cls, index: int, *, runner: CliRunner = run_cli,
             timeout_s: float = CLI_TIMEOUT_S) -> AmdSmiCliSource:
        """The CLI source once one reading of GPU `index` came back."""
        source = cls(index, runner, timeout_s)
        try:
            reading = source.read()
        except TimeoutError as exc:
            raise SourceUnavailable(str(exc)) from exc
        if not any(value is not None for value in reading.values()):
            raise SourceUnavailable(f"amd-smi metric gave no reading for GPU {index}")
        return source

    def read(self) -> dict[str, float | None]:
        reading = parse_metric(self._runner(self._argv, self._timeout_s), self.index)
        if reading[THROTTLE]:
            self.throttle_names.update(CLI_THROTTLE_NAMES)
        return reading

    def close(self) -> None:
        """Nothing is held between calls."""


# The CLI prints throttle status only as THROTTLED / UNTHROTTLED, with no reason: one bit.
CLI_THROTTLE_NAMES: Mapping[int, str] = {0: AMD_SMI_THROTTLED}


def _gpu_entry(text: str | None, index: int) -> Mapping[str, Any] | None:
    if not text:
        return None
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        return None
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        return None
    if isinstance(data, Mapping):
        data = data.get("gpu_data", [data])
    if not isinstance(data, list):
        return None
    entries = [e for e in data if isinstance(e, Mapping)]
    for entry in entries:
        if entry.get("gpu") == index:
            return entry
    return entries[0] if len(entries) == 1 else None


def _path(entry: Mapping[str, Any], *keys: str) -> object:
    value: object = entry
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def parse_metric(text: str | None, index: int) -> dict[str, float | None]:
    """One reading from the output of `amd-smi metric --json`; None where it says nothing."""
    entry = _gpu_entry(text, index)
    if entry is None:
        return dict.fromkeys((POWER_W, ENERGY_J, GFX_CLOCK_MHZ, MEM_CLOCK_MHZ, TEMP_C,
                              UTIL_PCT, MEM_USED_B, THROTTLE))
    power = number(_path(entry, "power", "socket_power"))
    temp = number(_path(entry, "temperature", "hotspot"))
    if temp is None:
        temp = number(_path(entry, "temperature", "edge"))
    used = _path(entry, "mem_usage", "used_vram")
    used_mb = number(used)
    unit = used.get("unit") if isinstance(used, Mapping) else "MB"
    scale = 1024.0**3 if unit == "GB" else 1024.0**2
    throttle = _path(entry, "power", "throttle_status")
    throttle_bits = None
    if isinstance(throttle, str) and throttle.upper() in ("THROTTLED", "UNTHROTTLED"):
        throttle_bits = 1.0 if throttle.upper() == "THROTTLED" else 0.0
    return {
        POWER_W: power,
        ENERGY_J: _joules(_path(entry, "energy", "total_energy_consumption")),
        GFX_CLOCK_MHZ: number(_path(entry, "clock", "gfx_0", "clk")),
        MEM_CLOCK_MHZ: number(_path(entry, "clock", "mem_0", "clk")),
        TEMP_C: temp,
        UTIL_PCT: number(_path(entry, "usage", "gfx_activity")),
        MEM_USED_B: used_mb * scale if used_mb is not None else None,
        THROTTLE: throttle_bits,
    }


def _joules(value: object) -> float | None:
    amount = number(value)
    unit = value.get("unit") if isinstance(value, Mapping) else "J"
    if amount is None:
        return None
    return amount * {"uJ": 1e-6, "mJ": 1e-3, "kJ": 1e3}.get(str(unit), 1.0)
