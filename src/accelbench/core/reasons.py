"""Reason codes: a stable name for each way a check can fail or warn, like DCGM's
DCGM_FR_* codes. Every health finding that warns or fails carries one (at the rule that
decides it), and every failed check has at least one (`analysis.checks`): the codes are
what a script, a dashboard or a drain list keys on, where messages may be reworded.

A code, once published, keeps its meaning; new codes are added, none is renamed. The
table below is the one source: docs/reasons.md and the JSON Schema of the checks'
output (schemas/checks-v1.schema.json) are generated from it and tests keep them equal.

`severity` is the worst level a finding of the code is given ("fail" or "warn"; a code
of severity fail may also warn where the rule says so, a PCIe link slower than both ends
on an idle GPU). `dcgm` is the closest DCGM_FR_* code of NVIDIA's DCGM diagnostics and
`rvs` the closest module of AMD's ROCm Validation Suite, where one exists.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

FAIL, WARN = "fail", "warn"
AREAS = ("host", "gpu", "link", "gate", "correctness", "run")
PATTERN = re.compile(r"ACCEL_[A-Z0-9_]+")


@dataclass(frozen=True)
class Reason:
    code: str
    meaning: str  # one line
    severity: str  # FAIL or WARN
    area: str  # one of AREAS
    dcgm: str | None  # the closest DCGM_FR_* code
    rvs: str | None  # the closest RVS module
    action: str  # what an operator does

    def to_dict(self) -> dict[str, str | None]:
        return {"code": self.code, "meaning": self.meaning, "severity": self.severity,
                "area": self.area, "dcgm": self.dcgm, "rvs": self.rvs, "action": self.action}


_DRAIN_GPU = "drain and replace the GPU"
_RERUN = "rerun; if it repeats, drain the node"
_RESEAT = "reseat the card / check the riser and the slot"
_CONFIG = "fix the node's configuration (kernel command line, BIOS) and rerun"
_SOFTWARE = "check the installed stack (driver, runtime, PyTorch and its libraries)"


def _r(code: str, meaning: str, severity: str, area: str, action: str,
       dcgm: str | None = None, rvs: str | None = None) -> Reason:
    return Reason(code, meaning, severity, area, dcgm, rvs, action)


REASONS: tuple[Reason, ...] = (
    # -- the host --------------------------------------------------------------------
    _r("ACCEL_EDAC_UE", "uncorrected host memory errors (EDAC)", FAIL, "host",
       "drain the node and replace the DIMM named"),
    _r("ACCEL_EDAC_CE", "corrected host memory errors (EDAC): a DIMM wearing out", WARN,
       "host", "watch the count; replace the DIMM at the next maintenance"),
    _r("ACCEL_NUMA", "a NUMA node with CPUs is missing memory (fewer or smaller DIMMs)",
       FAIL, "host", "check the DIMMs of the node named (a missing or failed DIMM)"),
    _r("ACCEL_NUMA_AFFINITY", "a GPU or NIC has no NUMA node on a multi-node host "
       "(the firmware gives -1)", WARN, "host", "update the BIOS; pin processes by hand"),
    _r("ACCEL_NUMA_BALANCING", "automatic NUMA balancing is on on a GPU node", WARN, "host",
       "set kernel.numa_balancing=0"),
    _r("ACCEL_NUMA_PLACEMENT", "memory asked on one NUMA node landed on another", WARN,
       "host", "check the node's memory policy and free memory per node"),
    _r("ACCEL_PCIE_WIDTH", "a PCIe link trained narrower than both ends support", FAIL,
       "link", _RESEAT, "DCGM_FR_PCIE_WIDTH", "peqt"),
    _r("ACCEL_PCIE_SPEED", "a PCIe link runs slower (a lower generation) than both ends "
       "support", FAIL, "link", _RESEAT, "DCGM_FR_PCIE_GENERATION", "peqt"),
    _r("ACCEL_PCIE_AER", "uncorrectable PCIe errors (AER, fatal or non-fatal)", FAIL, "link",
       "drain; reseat the card / check the riser, then replace it if it repeats"),
    _r("ACCEL_PCIE_AER_CE", "corrected PCIe errors (AER): the link retries", WARN, "link",
       "watch the count; reseat the card if it grows", "DCGM_FR_PCIE_H_REPLAY_VIOLATION"),
    _r("ACCEL_PCIE_REPLAY", "PCIe replays or NAKs on a GPU's link", WARN, "link",
       "watch the count; reseat the card if it grows", "DCGM_FR_PCIE_REPLAY_VIOLATION",
       "pesm"),
    _r("ACCEL_ACS", "a PCIe switch above two or more GPUs redirects peer-to-peer traffic "
       "(ACS P2P redirect on)", WARN, "link", "disable ACS on the switch (BIOS or setpci)"),
    _r("ACCEL_IOMMU", "a GPU's IOMMU group translates DMA (not passthrough)", WARN, "host",
       "boot with iommu=pt"),
    _r("ACCEL_HUGEPAGES", "hugepages are not set up as the node's profile asks", WARN,
       "host", _CONFIG),
    # -- the GPU ---------------------------------------------------------------------
    _r("ACCEL_GPU_MISSING", "a GPU on the PCI bus is not seen by the runtime", FAIL, "gpu",
       "reset the GPU or reboot; if it stays missing, drain and replace it",
       "DCGM_FR_DEVICE_COUNT_MISMATCH", "gpup"),
    _r("ACCEL_GPU_FAULT", "the kernel logged a GPU fault (an NVIDIA Xid, an amdgpu reset "
       "or RAS error)", FAIL, "gpu", "read the logged event; a hardware Xid or an "
       "uncorrectable RAS error: drain and replace the GPU", "DCGM_FR_XID_ERROR"),
    _r("ACCEL_ECC_DBE", "uncorrectable (double-bit) or deferred GPU memory ECC errors",
       FAIL, "gpu", _DRAIN_GPU, "DCGM_FR_VOLATILE_DBE_DETECTED", "mem"),
    _r("ACCEL_ECC_SBE", "corrected (single-bit) GPU memory ECC errors", WARN, "gpu",
       "watch the count; reset the GPU to retire pages", "DCGM_FR_VOLATILE_SBE_DETECTED",
       "mem"),
    _r("ACCEL_ECC_LIFETIME", "uncorrectable ECC errors in the GPU's lifetime count", WARN,
       "gpu", "check the retired pages; replace the GPU if errors return",
       "DCGM_FR_DBE_VIOLATION"),
    _r("ACCEL_ECC_DISABLED", "ECC is off on a GPU that supports it", WARN, "gpu",
       "turn ECC on and reset the GPU", "DCGM_FR_ECC_DISABLED"),
    _r("ACCEL_RETIRED_PAGES", "bad GPU memory pages could not be retired (unreservable)",
       FAIL, "gpu", _DRAIN_GPU, "DCGM_FR_RETIRED_PAGES_LIMIT"),
    _r("ACCEL_ROW_REMAP_FAILED", "a GPU memory row remapping failed", FAIL, "gpu",
       _DRAIN_GPU, "DCGM_FR_ROW_REMAP_FAILURE"),
    _r("ACCEL_PAGES_PENDING", "bad pages or row remappings wait for a GPU reset", WARN,
       "gpu", "reset the GPU (drain it first) and rerun",
       "DCGM_FR_PENDING_PAGE_RETIREMENTS"),
    _r("ACCEL_THROTTLE_THERMAL", "a thermal or hardware slowdown is active", WARN, "gpu",
       "check the cooling: fans, airflow, heat sink", "DCGM_FR_CLOCK_THROTTLE_THERMAL",
       "gm"),
    _r("ACCEL_THROTTLE_POWER", "a hardware power brake slows the GPU", WARN, "gpu",
       "check the power supply and the power brake signal",
       "DCGM_FR_CLOCK_THROTTLE_POWER", "gm"),
    _r("ACCEL_THROTTLE", "the device throttled in more readings under load than allowed",
       FAIL, "gpu", "check the cooling and power limits; rerun",
       "DCGM_FR_THROTTLING_VIOLATION", "tst"),
    _r("ACCEL_CLOCK_SAG", "the GFX clock fell under a sustained load", FAIL, "gpu",
       "check the cooling and power limits; rerun", "DCGM_FR_THERMAL_VIOLATIONS", "tst"),
    _r("ACCEL_THROUGHPUT_SAG", "throughput fell from the first interval to the last under "
       "a sustained load", WARN, "gpu", _RERUN, "DCGM_FR_STRESS_LEVEL", "gst"),
    _r("ACCEL_VERSION_MISMATCH", "a driver or firmware version differs between the node's "
       "GPUs", WARN, "gpu", "flash every GPU to one firmware version", None, "rcqt"),
    # -- GPU-to-GPU links --------------------------------------------------------------
    _r("ACCEL_XGMI_LINK_DOWN", "an XGMI link is down (up on another GPU of the node), or "
       "a GPU has fewer XGMI links up than another", FAIL, "link",
       "reset the GPUs; if it stays down, drain and check the board"),
    _r("ACCEL_NVLINK_DOWN", "an NVLink is down (up on another GPU of the node), or a GPU "
       "has fewer NVLinks up than another", FAIL, "link",
       "reset the GPUs; if it stays down, drain and check the board",
       "DCGM_FR_NVLINK_DOWN"),
    _r("ACCEL_LINK_DOWN", "fewer GPU-to-GPU links up than the gate asks", FAIL, "link",
       "reset the GPUs; if it stays down, drain and check the board",
       "DCGM_FR_GPU_EXPECTED_NVLINKS_UP"),
    _r("ACCEL_LINK_ERRORS", "GPU-to-GPU link replay, recovery or CRC errors, or an XGMI "
       "error status", WARN, "link", "watch the count; reseat or replace if it grows",
       "DCGM_FR_NVLINK_ERROR_THRESHOLD"),
    _r("ACCEL_PEER_ACCESS", "two GPUs cannot reach each other's memory, or peer access "
       "does not speed their copies", WARN, "link",
       "turn P2P on (BIOS, IOMMU passthrough, ACS off)", None, "pbqt"),
    _r("ACCEL_COPY_MISMATCH", "a copy delivered wrong data", FAIL, "link",
       "drain; reseat the card / check the riser, then replace the GPU",
       "DCGM_FR_BROKEN_P2P_MEMORY_DEVICE", "pbqt"),
    _r("ACCEL_COPY_SLOW", "a device or link copies slower than its peers (or a NUMA node "
       "its own memory)", FAIL, "link", _RESEAT, "DCGM_FR_LOW_BANDWIDTH", "pebb"),
    # -- qualification gates ----------------------------------------------------------
    _r("ACCEL_MEMORY_SIZE", "a device reports less memory than its gate", FAIL, "gate",
       "check the memory configuration; drain and replace the GPU"),
    _r("ACCEL_GEMM_BELOW_GATE", "GEMM throughput below its gate", FAIL, "gate",
       "check clocks and cooling; rerun; if it repeats, drain",
       "DCGM_FR_GFLOPS_THRESHOLD_VIOLATION", "gst"),
    _r("ACCEL_MEMORY_BELOW_GATE", "device memory bandwidth below its gate", FAIL, "gate",
       _RERUN, "DCGM_FR_MEMORY_BANDWIDTH", "babel"),
    _r("ACCEL_HOST_LINK_BELOW_GATE", "host-to-device or device-to-host copy bandwidth "
       "below its gate", FAIL, "gate", _RESEAT, "DCGM_FR_LOW_BANDWIDTH", "pebb"),
    _r("ACCEL_PEER_BELOW_GATE", "device-to-device copy bandwidth below its gate", FAIL,
       "gate", _RESEAT, "DCGM_FR_LOW_BANDWIDTH", "pbqt"),
    _r("ACCEL_ALLREDUCE_BELOW_GATE", "all-reduce bus bandwidth below its gate", FAIL, "gate",
       _RERUN),
    _r("ACCEL_LAUNCH_ABOVE_GATE", "kernel launch latency above its gate", FAIL, "gate",
       _RERUN, "DCGM_FR_HIGH_LATENCY"),
    _r("ACCEL_POWER_BELOW_GATE", "the board power sustained under load below its gate",
       FAIL, "gate", "check the power limit and supply; rerun",
       "DCGM_FR_TARGET_POWER", "iet"),
    _r("ACCEL_TRAIN_BELOW_GATE", "a small model's training throughput below its gate", FAIL,
       "gate", _RERUN),
    _r("ACCEL_NO_GATE", "no gates for this device model: nothing was judged", WARN, "gate",
       "add the model's gates to the gates file"),
    # -- correctness -----------------------------------------------------------------
    _r("ACCEL_NUMERICS", "an operator's result is outside its tolerance", FAIL,
       "correctness", "compare with another node of the stack; a stack bug or a bad GPU",
       "DCGM_FR_NAN_VALUE"),
    _r("ACCEL_NONDETERMINISTIC", "repeated runs of one computation differ", FAIL,
       "correctness", _RERUN),
    _r("ACCEL_AMP", "mixed precision (autocast, grad scaling) fails or diverges", FAIL,
       "correctness", _SOFTWARE),
    _r("ACCEL_COMPILE", "torch.compile fails or changes results", FAIL, "correctness",
       _SOFTWARE),
    _r("ACCEL_EXPORT", "torch.export or ONNX export fails or changes results", FAIL,
       "correctness", _SOFTWARE),
    _r("ACCEL_LIBRARY", "a domain library (torchvision, torchaudio, torchtext, torchrec) "
       "fails or is wrong", FAIL, "correctness", _SOFTWARE),
    _r("ACCEL_MEMTEST", "a device memory test found wrong data", FAIL, "correctness",
       _DRAIN_GPU, "DCGM_FR_FAULTY_MEMORY", "mem"),
    _r("ACCEL_BURN_IN", "a wrong result under a sustained load", FAIL, "correctness",
       "drain and replace the GPU if it repeats", "DCGM_FR_STRESS_LEVEL", "gst"),
    _r("ACCEL_COLLECTIVE", "a collective across ranks fails or is wrong", FAIL,
       "correctness", "check the links and the collective library; rerun"),
    # -- the run itself --------------------------------------------------------------
    _r("ACCEL_TIMEOUT", "the check passed its deadline and was stopped", FAIL, "run",
       _RERUN),
    _r("ACCEL_WORKER_LOST", "the check's process died (crashed, killed, or stopped "
       "answering)", FAIL, "run", _RERUN),
    _r("ACCEL_CHECK_ERROR", "the check itself raised an unexpected error", FAIL, "run",
       "read the stored traceback; an accelbench or stack bug"),
    _r("ACCEL_JOB_FAILED", "the node's qualification job failed (its own output says how)",
       FAIL, "run", "read the job's output; rerun"),
    # -- diagnose against a baseline ---------------------------------------------------
    _r("ACCEL_BELOW_BASELINE", "a figure outside a diagnose rule's limits against the "
       "baseline", FAIL, "run", _RERUN),
    _r("ACCEL_CASE_FAILED", "a case a diagnose status rule covers failed", FAIL, "run",
       _RERUN),
    _r("ACCEL_CASE_MISSING", "a case the node was asked to run was not measured", FAIL,
       "run", "rerun the missing case"),
    _r("ACCEL_WIRING", "the node's GPU/NIC wiring differs from most nodes of its stack",
       FAIL, "link", "compare the node's topology; reseat cards or fix the BIOS"),
)

BY_CODE: dict[str, Reason] = {r.code: r for r in REASONS}
CODES: tuple[str, ...] = tuple(BY_CODE)

# The code of a check whose benchmark fails without findings (validation, a stress's
# wrong result, a copy's wrong data).
BENCH_CODES: dict[str, str] = {
    "numerics": "ACCEL_NUMERICS", "determinism": "ACCEL_NONDETERMINISTIC",
    "amp": "ACCEL_AMP", "compile": "ACCEL_COMPILE", "export": "ACCEL_EXPORT",
    "onnx": "ACCEL_EXPORT", "torchvision": "ACCEL_LIBRARY", "torchaudio": "ACCEL_LIBRARY",
    "torchtext": "ACCEL_LIBRARY", "torchrec": "ACCEL_LIBRARY", "memtest": "ACCEL_MEMTEST",
    "burn-in": "ACCEL_BURN_IN", "distributed": "ACCEL_COLLECTIVE",
    "stress": "ACCEL_BURN_IN", "copy-matrix": "ACCEL_COPY_MISMATCH",
}
TIMEOUT, WORKER_LOST, CHECK_ERROR = "ACCEL_TIMEOUT", "ACCEL_WORKER_LOST", "ACCEL_CHECK_ERROR"


def reason(code: str) -> Reason:
    """The reason of `code` (KeyError for an unknown one)."""
    return BY_CODE[code]


def nearest(code: str) -> str | None:
    """The known code closest to `code` in spelling, for a message; None for none."""
    found = difflib.get_close_matches(code.upper(), CODES, n=1, cutoff=0.0)
    return found[0] if found else None


def known_codes(names: Sequence[str], option: str = "--code") -> tuple[str, ...]:
    """`names` as codes of the table (any case; "ACCEL_" may be left off); a UserError
    naming the nearest known code for one that is not."""
    from accelbench.errors import UserError

    out = []
    for name in names:
        code = name.strip().upper()
        code = code if code.startswith("ACCEL_") else f"ACCEL_{code}"
        if code not in BY_CODE:
            near = nearest(code)
            raise UserError(f"{option} {name!r}: no such reason code"
                            + (f" (nearest: {near})" if near else "")
                            + "; docs/reasons.md lists them")
        out.append(code)
    return tuple(dict.fromkeys(out))
