"""The node's health and copy matrix on a real GPU node, through the runner as
`accelbench health` and `accelbench run --bench copy-matrix` run them.

Expected on one H200 (PCIe Gen5 x16, 63 GB/s per direction): the GPU health checks read
from NVML pass or warn (none fails on a healthy node), the GPU's PCIe link is read at
x16; pinned host-to-device and device-to-host copies reach 20-60 GB/s, checked on known
data; with one GPU there is no pair of devices to copy between. The run's fingerprint
keeps the GPU in its wiring, its direct links read through NVML; no case logs a GPU fault."""

from __future__ import annotations

import pytest
from gpu_runs import run_on_gpu

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    store = tmp_path_factory.mktemp("health") / "results.sqlite"
    return run_on_gpu(store, ["health", "copy-matrix"], {"bytes": "256M"})


def test_every_gpu_health_check_reads_the_gpus(run, gpu):
    checks = {m.case.param_dict.get("check"): m for m in run.measurements
              if m.case.benchmark == "health"}
    for name in ("gpu-ecc", "gpu-pcie", "gpu-throttle", "gpu-versions"):
        m = checks[name]
        if m.status == "skipped":
            pytest.skip(f"{name}: {m.reason} (install accelbench[telemetry])")
        assert m.status == "ok", (name, m.reason)
        assert len(m.details["gpus"]) >= gpu.count
    pcie = checks["gpu-pcie"].details["gpus"][0]["pcie"]
    assert pcie["width"] and pcie["width_max"] and pcie["width"] <= pcie["width_max"]


def test_host_links_are_copied_checked_and_rated(run, gpu):
    [m] = [m for m in run.measurements if m.case.benchmark == "copy-matrix"]
    assert m.status == "ok", m.reason
    kinds = {p["kind"] for p in m.details["paths"]}
    assert {"h2d", "d2h"} <= kinds
    if gpu.count > 1:
        assert {"d2d", "d2d-bidir"} <= kinds
    for p in m.details["paths"]:
        if p["kind"] in ("h2d", "d2h"):
            assert 5e9 < p["bandwidth"] < 200e9, p
    if gpu.count > 1:  # a copy kernel and peer access off, where the pair has peer access
        assert {"d2d-kernel", "d2d-nopeer"} & kinds or any(
            f["subject"].endswith(" peer") for f in m.details.get("findings", []))


def test_the_runs_fingerprint_keeps_the_gpus_wiring_and_no_case_logged_a_fault(run, gpu):
    wiring = run.fingerprint["topology"]
    assert "missing" not in wiring, wiring
    assert sum(name.startswith("GPU") for name in wiring["names"]) >= gpu.count
    if wiring["direct"]["read"] is False:
        pytest.skip(f"no GPU library: {wiring['direct']['missing']} (accelbench[telemetry])")
    assert wiring["direct"]["source"] in ("nvml", "amdsmi")
    faulted = {m.case.label: m.details["gpu_events"] for m in run.measurements
               if "gpu_events" in m.details}
    assert not faulted, faulted
