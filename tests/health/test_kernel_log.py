"""GPU faults since boot, from kernel log records as /dev/kmsg gives them, and this
machine's own log where it can be read."""

from __future__ import annotations

from accelbench.benchmarks.health import kernel_log
from accelbench.benchmarks.health.findings import FAIL, PASS, WARN

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
