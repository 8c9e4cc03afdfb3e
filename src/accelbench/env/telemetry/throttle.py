"""The reasons of the THROTTLE channel: the names of the bits active in one reading, and
which reasons are slowdowns, the ones a GPU is failed on.

A slowdown is the hardware holding the clock down because something is wrong: heat, or a
power supply asserting its brake. DCGM's diagnostic fails a GPU on four of NVML's
clock-event reasons (nvmlClocksEventReasons in nvml.h) and no others: HwSlowdown (0x8),
SwThermalSlowdown (0x20), HwThermalSlowdown (0x40) and HwPowerBrakeSlowdown (0x80)
(NVIDIA/DCGM, nvvs/src/DcgmRecorder.cpp, CheckForClocksEvent's failureMask). SwPowerCap
(0x4) is the GPU holding its own power limit and SyncBoost (0x10) a sync-boost group
holding one clock: a healthy GPU under full load shows them, so they are recorded, not
judged, as are GpuIdle (0x1) and the clock settings (0x2, 0x100).

AMD's slowdowns are amdsmi_get_violation_status's thermal violations (active_socket_thrm,
active_vr_thrm, active_hbm_thrm, active_prochot_thrm: the `*_thrm` names, and from
gpu_metrics 1.8 active_gfx_clk_below_host_limit_thm, per partition) and the SMU's
temperature, VR-hot and PROCHOT throttlers of gpu_metrics' indep_throttle_status (the
kernel's SMU_THROTTLER_TEMP_*, SMU_THROTTLER_VRHOT* and SMU_THROTTLER_PROCHOT_* bits,
amdgpu_smu.h). Package power (PPT*, SPL, FPPT, SPPT*, active_ppt_pwr), current (TDC_*,
EDC_*) and the other limits are the part holding its limits, as SwPowerCap is.

Some reasons say that the clock is held but not why, so they are neither: the amd-smi
CLI's THROTTLED (any throttler sets it, the power limit as well as heat) and a bit no
legend names.
"""

from __future__ import annotations

from collections.abc import Mapping

NVML_SLOWDOWNS = frozenset({"HwSlowdown", "SwThermalSlowdown", "HwThermalSlowdown",
                            "HwPowerBrakeSlowdown"})
# The slowdown that is the power brake (a signal from the power supply), not heat.
POWER_SLOWDOWNS = frozenset({"HwPowerBrakeSlowdown"})
_SMU_SLOWDOWN_PREFIXES = ("TEMP_", "VRHOT", "PROCHOT")
# The amd-smi CLI's one reason: `amd-smi metric` prints throttle_status as THROTTLED or
# UNTHROTTLED only.
AMD_SMI_THROTTLED = "throttled (amd-smi throttle_status)"
_UNNAMED_BIT = "throttle bit"


def is_slowdown(reason: str) -> bool:
    """Whether a reason, named as the telemetry sources and the health readings name it,
    is a slowdown (see the module's docstring)."""
    return (reason in NVML_SLOWDOWNS or reason.endswith(("_thrm", "_limit_thm"))
            or reason.startswith(_SMU_SLOWDOWN_PREFIXES))


def says_why(reason: str) -> bool:
    """Whether a reason says what holds the clock, so that it is a slowdown or not."""
    return reason != AMD_SMI_THROTTLED and not reason.startswith(_UNNAMED_BIT)


def active_reasons(mask: int, names: Mapping[int, str]) -> dict[int, str]:
    """The bits set in one THROTTLE reading, lowest first, each with its name; a bit
    `names` does not know is "throttle bit N"."""
    return {bit: names.get(bit, f"{_UNNAMED_BIT} {bit}")
            for bit in range(mask.bit_length()) if mask >> bit & 1}
