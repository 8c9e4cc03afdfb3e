"""Telemetry sequences for the fake vendor libraries, shaped after readings of an AMD
Instinct MI300X (amdsmi, ROCm 6.3) and an NVIDIA H100 SXM (NVML, driver 550) running a
GEMM loop: idle, ramp, a power-capped stretch with the GFX clock pulled down, and back.
One entry per 0.1 s sample; counters are derived from the power so they agree with it."""

from __future__ import annotations

import json

INTERVAL_S = 0.1

# ------------------------------------------------------------------------- MI300X

MI300X_POWER_W = [142.0, 168.0, 655.0, 731.0, 748.0, 750.0, 749.0, 744.0, 702.0, 318.0, 151.0]
MI300X_GFX_MHZ = [132.0, 2100.0, 2100.0, 2100.0, 2100.0, 1650.0, 1700.0, 2100.0, 2100.0,
                  2100.0, 140.0]
MI300X_PPT_ACTIVE = [0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0]  # active_ppt_pwr: the power cap
MI300X_RESOLUTION_UJ = 15.259


def mi300x_counter(start_ticks: int = 981_234_567_890, scale: float = 1.0,
                   wrap_ticks: int | None = None) -> list[int]:
    """The energy accumulator in ticks of MI300X_RESOLUTION_UJ, following the power (times
    `scale`, for a counter that misreports), wrapping at `wrap_ticks` when given."""
    ticks, out = float(start_ticks), []
    for i, power in enumerate(MI300X_POWER_W):
        if i:
            joules = 0.5 * (power + MI300X_POWER_W[i - 1]) * INTERVAL_S * scale
            ticks += joules / (MI300X_RESOLUTION_UJ * 1e-6)
        value = round(ticks)
        out.append(value % wrap_ticks if wrap_ticks else value)
    return out


def mi300x_samples(counter: list[int] | None = None) -> list[dict[str, object]]:
    counter = counter or mi300x_counter()
    return [
        {
            "power": {"current_socket_power": int(p), "average_socket_power": "N/A",
                      "gfx_voltage": "N/A", "power_limit": 750},
            "energy": {"energy_accumulator": c, "counter_resolution": MI300X_RESOLUTION_UJ,
                       "timestamp": 1_700_000_000_000 + i * 100_000_000},
            "gfx_clk": {"clk": int(g), "min_clk": 500, "max_clk": 2100, "clk_locked": False,
                        "clk_deep_sleep": g < 500},
            "mem_clk": {"clk": 1300, "min_clk": 900, "max_clk": 1300},
            "hotspot_c": 44 + i * 3,
            "activity": {"gfx_activity": 0 if i in (0, 10) else 100, "umc_activity": 61,
                         "mm_activity": "N/A"},
            "vram_b": 291_504_128 + (i > 0) * 25_769_803_776,
            "violation": {"active_prochot_thrm": 0, "active_ppt_pwr": ppt,
                          "active_socket_thrm": 0, "active_vr_thrm": 0,
                          "active_hbm_thrm": 0, "active_gfx_clk_below_host_limit": 0},
        }
        for i, (p, c, g, ppt) in enumerate(
            zip(MI300X_POWER_W, counter, MI300X_GFX_MHZ, MI300X_PPT_ACTIVE, strict=True)
        )
    ]


# --------------------------------------------------------------------------- H100

H100_POWER_MW = [69_512, 402_331, 688_904, 699_870, 700_112, 699_456, 700_004, 698_221,
                 512_090, 121_733, 70_218]
H100_SM_MHZ = [345, 1980, 1980, 1980, 1755, 1755, 1980, 1980, 1980, 1980, 345]
# nvmlClocksEventReasons: GpuIdle (0x1) while idle, SwPowerCap (0x4) mid-window.
H100_REASONS = [0x1, 0x0, 0x0, 0x0, 0x4, 0x4, 0x0, 0x0, 0x0, 0x0, 0x1]


def h100_energy_mj(start_mj: int = 8_812_345_678) -> list[int]:
    mj, out = float(start_mj), []
    for i, power in enumerate(H100_POWER_MW):
        if i:
            mj += 0.5 * (power + H100_POWER_MW[i - 1]) * INTERVAL_S  # mW x s = mJ
        out.append(round(mj))
    return out


# ------------------------------------------------------------------- amd-smi CLI

# `amd-smi metric --json -g 0` on ROCm 6.3 (trimmed: pcie, ecc and the other XCD clocks
# left out), preceded by the warning line it prints without root.
AMD_SMI_METRIC_JSON = "WARNING: User is missing the following required groups: render\n" + (
    json.dumps({"gpu_data": [{
        "gpu": 0,
        "usage": {"gfx_activity": {"value": 100, "unit": "%"},
                  "umc_activity": {"value": 58, "unit": "%"}, "mm_activity": "N/A"},
        "power": {"socket_power": {"value": 702, "unit": "W"}, "gfx_voltage": "N/A",
                  "soc_voltage": "N/A", "mem_voltage": "N/A",
                  "throttle_status": "UNTHROTTLED", "power_management": "ENABLED"},
        "clock": {"gfx_0": {"clk": {"value": 2093, "unit": "MHz"},
                            "min_clk": {"value": 500, "unit": "MHz"},
                            "max_clk": {"value": 2100, "unit": "MHz"},
                            "clk_locked": "DISABLED", "deep_sleep": "DISABLED"},
                  "mem_0": {"clk": {"value": 1300, "unit": "MHz"},
                            "min_clk": {"value": 900, "unit": "MHz"},
                            "max_clk": {"value": 1300, "unit": "MHz"},
                            "clk_locked": "N/A", "deep_sleep": "DISABLED"}},
        "temperature": {"edge": {"value": "N/A", "unit": "C"},
                        "hotspot": {"value": 71, "unit": "C"},
                        "mem": {"value": 58, "unit": "C"}},
        "energy": {"total_energy_consumption": {"value": 14_973_202.411, "unit": "J"}},
        "mem_usage": {"total_vram": {"value": 196_592, "unit": "MB"},
                      "used_vram": {"value": 24_866, "unit": "MB"},
                      "free_vram": {"value": 171_726, "unit": "MB"}},
    }]}, indent=4)
)


# ------------------------------------------------------------- H100, a power step

# A GEMM starting on an idle H100 SXM: 70 W until 0.5 s, 700 W after, 0.1 s apart.
# NVML_FI_DEV_POWER_INSTANT follows it; nvmlDeviceGetPowerUsage (driver 550, Hopper)
# is its average over the last second, so it ramps for a second after the step.
H100_STEP_TRUE_MW = [70_000] * 5 + [700_000] * 21


def h100_step_average_mw() -> list[int]:
    """nvmlDeviceGetPowerUsage: the mean of the last 1 s (ten 0.1 s steps) of power."""
    history = [H100_STEP_TRUE_MW[0]] * 10 + H100_STEP_TRUE_MW
    return [round(sum(history[i + 1:i + 11]) / 10) for i in range(len(H100_STEP_TRUE_MW))]


def h100_step_energy_mj(start_mj: int = 8_812_345_678) -> list[int]:
    """The energy counter, which integrates the true power (a step at each sample)."""
    mj, out = float(start_mj), []
    for i, power in enumerate(H100_STEP_TRUE_MW):
        if i:
            mj += power * INTERVAL_S  # the power of the step that ends at this sample
        out.append(round(mj))
    return out


# ------------------------------------------------------------------ MI250X, 2 GCDs

# amdsmi (ROCm 6.2) on one MI250X: its two GCDs are two processors, on PCI buses c1 and
# c6, with the board's one serial. The primary GCD reports the package's average socket
# power (1 s average; no current_socket_power on MI200) and its 64-bit energy count; the
# secondary reports 0 for both, as amdgpu's aldebaran code sets them.
MI250X_BDF = ("0000:c1:00.0", "0000:c6:00.0")
MI250X_SERIAL = "692251001234"
MI250X_POWER_W = [96.0, 388.0, 512.0, 515.0, 514.0, 516.0, 515.0, 513.0, 514.0, 402.0, 97.0]
MI250X_RESOLUTION_UJ = 15.259


def mi250x_gcd_samples(gcd: int, start_ticks: int = 61_234_567_890_123
                       ) -> list[dict[str, object]]:
    """What amdsmi answers for GCD `gcd` (0: primary) at each 0.1 s sample."""
    ticks, out = float(start_ticks), []
    for i, power in enumerate(MI250X_POWER_W):
        if i:
            joules = 0.5 * (power + MI250X_POWER_W[i - 1]) * INTERVAL_S
            ticks += joules / (MI250X_RESOLUTION_UJ * 1e-6)
        primary = gcd == 0
        out.append({
            "power": {"current_socket_power": "N/A",
                      "average_socket_power": int(power) if primary else 0,
                      "gfx_voltage": 812, "power_limit": 560},
            "energy": {"energy_accumulator": round(ticks) if primary else 0,
                       "counter_resolution": MI250X_RESOLUTION_UJ,
                       "timestamp": 1_700_000_000_000 + i * 100_000_000},
            "gfx_clk": {"clk": 1700, "min_clk": 500, "max_clk": 1700, "clk_locked": False,
                        "clk_deep_sleep": False},
            "mem_clk": {"clk": 1600, "min_clk": 400, "max_clk": 1600},
            "hotspot_c": 40 + i * 2 + gcd,
            "activity": {"gfx_activity": 0 if i in (0, 10) else 100, "umc_activity": 40,
                         "mm_activity": 0},
            "vram_b": 10_485_760 + (i > 0) * 17_179_869_184,
            "violation": {"active_prochot_thrm": 0, "active_ppt_pwr": 0,
                          "active_socket_thrm": 0, "active_vr_thrm": 0,
                          "active_hbm_thrm": 0, "active_gfx_clk_below_host_limit": 0},
        })
    return out


MI250X_ASIC = {"market_name": "AMD Instinct MI250X", "vendor_id": "0x1002",
               "device_id": "0x740c", "rev_id": "0x01", "asic_serial": "0x4C6A1B2C3D4E5F60",
               "oam_id": "N/A", "num_of_compute_units": 110,
               "target_graphics_version": "gfx90a"}
