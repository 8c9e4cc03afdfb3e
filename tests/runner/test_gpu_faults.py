"""GPU faults logged while a case ran: the kernel log watched from the case's start,
each fault judged against the case (a hardware fault fails it, with its figures kept)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from accelbench.core.case import Case
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import Measurement
from accelbench.core.timing import Timing
from accelbench.env import kernel_log
from accelbench.env.kernel_log import KernelWatch
from accelbench.runner import gpu_faults
from accelbench.store import Store

RECORDED = Path(__file__).resolve().parent.parent / "fixtures" / "kernel_log"
BEFORE = ("3,1402,91234567,-;NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', "
          "name=<unknown>, GPU has fallen off the bus.\n")
DURING = [
    "3,1500,95000000,-;NVRM: Xid (PCI:0000:3b:00): 48, pid='<unknown>', name=<unknown>, "
    "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer",
    "3,1501,95100000,-;NVRM: Xid (PCI:0000:5d:00): 63, pid='<unknown>', name=<unknown>, "
    "Row Remapping Event",
    "4,1502,95200000,-;amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!",
    " SUBSYSTEM=pci",
    " DEVICE=+pci:0000:c1:00.0",
    "6,1503,95300000,-;NVRM: Xid (PCI:0000:5d:00): 13, pid=4242, name=python, "
    "Graphics Exception",
]


def _measured(status: str = "ok") -> Measurement:
    case = Case(benchmark="gemm", version="1", family="micro", params=(("shape", 512),),
                device="cuda:0")
    timing = Timing(samples=(1e-3, 1.1e-3, 0.9e-3), number=10, warmup_calls=2,
                    stop_reason="converged")
    return Measurement(case=case, status=status, timings=(timing,) if status == "ok" else (),
                       reason=None if status == "ok" else "it broke")


def _watched(tmp_path) -> list[kernel_log.Event]:
    log = tmp_path / "kmsg"
    log.write_text(BEFORE)
    watch = KernelWatch.open(str(log))
    assert watch is not None
    with watch, log.open("a") as more:
        more.write("\n".join(DURING) + "\n")
        more.flush()
        found = watch.read()
        assert watch.read() == []  # each record is read once
    return found


def test_the_watch_reads_only_what_was_logged_after_it_opened(tmp_path) -> None:
    found = _watched(tmp_path)
    assert [(e.bus_id, e.code) for e in found] == [
        ("0000:3b:00", 48), ("0000:5d:00", 63), ("0000:c1:00.0", None), ("0000:5d:00", 13)]
    assert [e.level for e in found] == ["fail", "warn", "warn", "pass"]


def test_a_hardware_fault_on_the_cases_gpu_fails_it_and_keeps_its_figures(tmp_path) -> None:
    judged = gpu_faults.judge(_measured(), _watched(tmp_path), "0000:3b:00.0")
    assert judged.status == "failed"
    assert judged.reason == ("the kernel logged a GPU hardware fault during the case: "
                             "Xid 48 (double-bit ECC error) at 95 s")
    assert judged.timings and judged.samples == (1e-3, 1.1e-3, 0.9e-3)
    assert [e["code"] for e in judged.details["gpu_events"]] == [48]


def test_another_gpu_fault_warns_and_an_application_fault_is_recorded(tmp_path) -> None:
    found = _watched(tmp_path)
    warned = gpu_faults.judge(_measured(), found, "0000:5d:00.0")
    assert warned.status == "ok"
    assert warned.warnings == ("the kernel logged a GPU fault during the case: Xid 63 at 95 s",)
    assert [e["code"] for e in warned.details["gpu_events"]] == [63, 13]
    amd = gpu_faults.judge(_measured(), found, "0000:c1:00.0")
    assert amd.status == "ok" and "GPU reset begin!" in amd.warnings[0]
    application = gpu_faults.judge(_measured(), found[3:], "0000:5d:00.0")
    assert application.status == "ok" and not application.warnings
    assert application.details["gpu_events"][0]["level"] == "pass"


def test_faults_of_other_gpus_leave_the_case_alone_unless_its_address_is_unknown(
        tmp_path) -> None:
    found = _watched(tmp_path)
    assert gpu_faults.judge(_measured(), found, "0000:17:00.0") == _measured()
    unknown = gpu_faults.judge(_measured(), found, None)
    assert unknown.status == "failed" and len(unknown.details["gpu_events"]) == 4


def test_a_failed_case_keeps_its_status_and_gains_the_fault(tmp_path) -> None:
    judged = gpu_faults.judge(_measured("failed"), _watched(tmp_path), "0000:3b:00.0")
    assert judged.status == "failed"
    assert judged.reason is not None and judged.reason.startswith("it broke; the kernel logged")


def test_a_failed_case_with_its_figures_is_stored_and_read_back(tmp_path) -> None:
    judged = gpu_faults.judge(_measured(), _watched(tmp_path), "0000:3b:00.0")
    with Store.open(tmp_path / "s.db") as store:
        fingerprint = _fingerprint()
        run_id = store.begin_run(fingerprint=fingerprint.to_dict(),
                                 fingerprint_id=fingerprint.fingerprint_id,
                                 generation_key=fingerprint.generation_key, device="cuda:0",
                                 suite=None, argv=(), host="n1", accelbench_version="0")
        store.add_measurement(run_id, judged)
        store.finish_run(run_id, "failed")
        (back,) = store.load_run(run_id).measurements
    assert back.status == "failed" and back.samples == judged.samples
    assert back.details["gpu_events"] == judged.details["gpu_events"]


def _fingerprint():
    from accelbench.env.fingerprint import Fingerprint

    device = DeviceInfo("cuda", 0, "cuda", "NVIDIA H100 80GB HBM3", "sm_90")
    return Fingerprint(device, {"platform": "cuda", "host": {"hostname": "n1"}})


def test_no_watch_on_the_cpu_nor_where_the_log_cannot_be_read(tmp_path) -> None:
    assert gpu_faults.watch(DeviceInfo("cpu", None, "cpu", "cpu")) is None
    assert KernelWatch.open(str(tmp_path / "absent")) is None


def test_this_machines_kernel_log_is_watched_from_its_end() -> None:
    watch = KernelWatch.open()
    if watch is None:
        pytest.skip("the kernel log cannot be read here (not root)")
    try:
        fd = os.open(kernel_log.KMSG, os.O_WRONLY)
    except OSError:
        watch.close()
        pytest.skip("the kernel log cannot be written here")
    with watch:
        os.write(fd, b"accelbench: kernel log watch test\n")
        os.close(fd)
        records = watch.records()
    assert any(r.endswith(";accelbench: kernel log watch test") for r in records), records
    assert len(records) < 50  # not the log's past


def _amd_watched(tmp_path, during: str) -> list[kernel_log.Event]:
    """What the watch reads of the recorded MI300X node when `during` is logged in a case,
    the node's start logged before it."""
    log = tmp_path / "kmsg"
    log.write_text((RECORDED / "mi300x-boot.kmsg").read_text())
    watch = KernelWatch.open(str(log))
    assert watch is not None
    with watch, log.open("a") as more:
        more.write((RECORDED / during).read_text())
        more.flush()
        return watch.read()


def test_a_corrected_amdgpu_ras_error_during_the_case_warns(tmp_path) -> None:
    judged = gpu_faults.judge(_measured(), _amd_watched(tmp_path, "mi300x-ras-errors.kmsg"),
                              "0000:9d:00.0")
    assert judged.status == "ok" and judged.timings
    assert judged.warnings == (
        "the kernel logged a GPU fault during the case: socket: 6, die: 1, 1533 new "
        "correctable hardware errors detected in xgmi_wafl block at 76911 s; socket: 6, "
        "die: 1, 1533 correctable hardware errors detected in total in xgmi_wafl block at "
        "76911 s",)
    assert [e["level"] for e in judged.details["gpu_events"]] == ["warn", "warn"]


def test_a_deferred_amdgpu_ras_error_during_the_case_fails_it(tmp_path) -> None:
    judged = gpu_faults.judge(_measured(), _amd_watched(tmp_path, "mi300x-ras-errors.kmsg"),
                              "0000:1b:00.0")
    assert judged.status == "failed" and judged.samples == (1e-3, 1.1e-3, 0.9e-3)
    assert judged.reason is not None and judged.reason.startswith(
        "the kernel logged a GPU hardware fault during the case: socket: 0, die: 0, 1 new "
        "deferred hardware errors detected in umc block at 76913 s")


def test_an_uncorrectable_amdgpu_ras_error_during_the_case_fails_it(tmp_path) -> None:
    judged = gpu_faults.judge(_measured(), _amd_watched(tmp_path, "mi300x-ras-errors.kmsg"),
                              "0000:dd:00.0")
    assert judged.status == "failed"
    assert judged.reason is not None and judged.reason.startswith(
        "the kernel logged a GPU hardware fault during the case: uncorrectable hardware "
        "error(ERREVENT_ATHUB_INTERRUPT) detected! at 76914 s; socket: 7, die: 0, 2 new "
        "uncorrectable hardware errors")
    assert [e["level"] for e in judged.details["gpu_events"]] == [
        "fail", "fail", "fail", "warn"]  # the count of 0 on die 1 is no event


def test_amdgpu_setting_up_ras_during_the_case_is_no_fault(tmp_path) -> None:
    """A GPU brought up again while a case runs (the driver reloaded) says RAS is ready."""
    found = _amd_watched(tmp_path, "mi300x-boot.kmsg")
    assert found == []
    assert gpu_faults.judge(_measured(), found, "0000:1b:00.0") == _measured()
