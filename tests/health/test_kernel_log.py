"""GPU faults since boot, from kernel log records as /dev/kmsg gives them, and this
machine's own log where it can be read."""

from __future__ import annotations

import re
from pathlib import Path

from accelbench.benchmarks.health import kernel_log
from accelbench.benchmarks.health.findings import FAIL, PASS, WARN

RECORDED = Path(__file__).resolve().parent.parent / "fixtures" / "kernel_log"

RECORDS = [
    "6,1201,5012345,-;NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07",
    "3,1402,91234567,-;NVRM: Xid (PCI:0000:1b:00): 13, pid=4242, name=python, Graphics "
    "Exception: ESR 0x514648=0x1000000e",
    "3,1403,92000000,-;NVRM: Xid (PCI:0000:3D:00): 63, pid='<unknown>', name=<unknown>, "
    "Row Remapping Event: Bank 5, Entry 12",
    "3,1404,93000000,-;NVRM: Xid (PCI:0000:9a:00): 79, pid='<unknown>', name=<unknown>, "
    "GPU has fallen off the bus.",
    "4,1500,94000000,-;amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!",
    "3,1501,94100000,-;amdgpu 0000:c1:00.0: amdgpu: 1 uncorrectable hardware errors "
    "detected in UMC block",
    "6,1502,95000000,-;amdgpu 0000:c2:00.0: amdgpu: SMU is initialized successfully!",
    "not a kmsg record",
]


def test_each_gpu_that_logged_a_fault_is_judged_by_the_worst_of_its_events() -> None:
    found = {f.subject: f for f in kernel_log.findings(kernel_log.events(RECORDS))}
    assert set(found) == {"0000:1b:00", "0000:3d:00", "0000:9a:00", "0000:c1:00.0"}
    assert found["0000:1b:00"].level == PASS  # an application's fault, recorded
    assert found["0000:3d:00"].level == WARN
    off = found["0000:9a:00"]
    assert off.level == FAIL and "Xid 79 (GPU has fallen off the bus) at 93 s" in off.message
    assert off.reading["events"][0]["code"] == 79
    amd = found["0000:c1:00.0"]
    assert amd.level == FAIL and "2 GPU events since boot" in amd.message


def test_a_log_without_gpu_faults_has_no_finding() -> None:
    assert kernel_log.findings(kernel_log.events(RECORDS[:1] + RECORDS[-2:])) == []


def test_this_machines_log_is_read_or_said_unreadable(tmp_path) -> None:
    records = kernel_log.kmsg_records()
    assert records is None or all(isinstance(r, str) for r in records)
    assert kernel_log.kmsg_records(str(tmp_path / "absent")) is None


def _recorded(name: str) -> list[str]:
    found = kernel_log.kmsg_records(str(RECORDED / name))
    assert found is not None
    return found


def test_an_amdgpu_corrected_error_warns_a_deferred_or_uncorrectable_one_fails() -> None:
    found = {f.subject: f for f in kernel_log.findings(
        kernel_log.events(_recorded("mi300x-ras-errors.kmsg")))}
    assert set(found) == {"0000:9d:00.0", "0000:1b:00.0", "0000:dd:00.0"}
    corrected = found["0000:9d:00.0"]
    assert corrected.level == WARN and corrected.rule == kernel_log.AMD_RULE
    assert corrected.code == "ACCEL_GPU_FAULT"
    assert "1533 new correctable hardware errors detected in xgmi_wafl block" in \
        corrected.message
    deferred = found["0000:1b:00.0"]
    assert deferred.level == FAIL
    assert "1 new deferred hardware errors detected in umc block" in deferred.message
    uncorrectable = found["0000:dd:00.0"]
    assert uncorrectable.level == FAIL
    assert uncorrectable.message.startswith(
        "4 GPU events since boot: uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) "
        "detected! at 76914 s")


def test_a_ras_count_of_zero_is_no_fault() -> None:
    found = [e.text for e in kernel_log.events(_recorded("mi300x-ras-errors.kmsg"))]
    assert not any(re.search(r"\b0 (?:un)?correctable", text) for text in found), found
    # As older kernels print it (dev_info, with amdgpu's "amdgpu: " prefix).
    zero = ["6,2212,91520409,-;amdgpu 0000:c2:00.0: amdgpu: socket: 7, die: 1, 0 "
            "uncorrectable hardware errors detected in total in umc block"]
    assert list(kernel_log.events(zero)) == []


def test_amdgpu_messages_before_the_ras_prefix_change_are_judged_alike() -> None:
    """Older kernels print RAS counts through dev_info, with amdgpu's "amdgpu: " prefix
    and no event id, and say a corrected error needs no action."""
    records = [
        "6,2210,91520331,-;amdgpu 0000:c1:00.0: amdgpu: socket: 4, die: 0 1 correctable "
        "hardware errors detected in gfx block, no user action is needed.",
        "6,2211,91520402,-;amdgpu 0000:c2:00.0: amdgpu: 2 uncorrectable hardware errors "
        "detected in umc block",
    ]
    assert [(e.bus_id, e.level) for e in kernel_log.events(records)] == [
        ("0000:c1:00.0", WARN), ("0000:c2:00.0", FAIL)]


def test_amdgpu_saying_ras_is_set_up_at_boot_is_no_fault() -> None:
    assert kernel_log.findings(kernel_log.events(_recorded("mi300x-boot.kmsg"))) == []
    # What amdgpu prints at every boot of a Radeon without the RAS firmware.
    radeon = ["6,1523,6106827,-;amdgpu 0000:03:00.0: amdgpu: RAS: optional ras ta ucode is "
              "not available"]
    assert list(kernel_log.events(radeon)) == []
