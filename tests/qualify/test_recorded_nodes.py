"""Recorded MI300X and H200 nodes judged by the gate check: the vendor library's recorded
answers (tests/fixtures/health) through the real figures and the shipped gates, each
failure with its subject and reason code. The timed figures' values are stated here, as
a node's measurements would be."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from qualify_nodes import gpu_node

from accelbench.benchmarks.qualify import declaration, figures
from accelbench.benchmarks.qualify.declaration import GATES_ENV, GateParams, applies
from accelbench.benchmarks.qualify.figures import Reading
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseFailed, CaseResult, CaseSkipped
from accelbench.core.timing import PerfCounterClock, TimingPolicy

pytestmark = pytest.mark.torch_api

MI300X = DeviceInfo(type="cuda", index=0, platform="rocm", name="AMD Instinct MI300X",
                    arch="gfx942", memory_bytes=192 << 30, compute_units=304)
# PyTorch's name for an H200 SXM, and the memory it reports (143771 MiB).
H200 = DeviceInfo(type="cuda", index=0, platform="cuda", name="NVIDIA H200", arch="sm_90",
                  memory_bytes=143771 << 20, compute_units=132)
RTX_4090 = DeviceInfo(type="cuda", index=0, platform="cuda", name="NVIDIA GeForce RTX 4090",
                      arch="sm_89", memory_bytes=24 << 30, compute_units=128)
CPU = DeviceInfo(type="cpu", index=None, platform="cpu", name="AMD EPYC 7B13")
CONFIGURATION = ("memory-size", "pcie-gen", "pcie-width", "links-up")


def _judge(device: DeviceInfo, figure: str, level: int = 2) -> tuple[str, list[dict[str, Any]]]:
    """The verdict of one gate case and its findings."""
    ctx = CaseContext(device, PerfCounterClock(), TimingPolicy())
    params = GateParams(figure=figure, level=level, budget=0.0, settle=0.0)
    try:
        result = declaration.measure(ctx, params)
    except CaseFailed as failed:
        return "fail", failed.details["findings"]
    assert isinstance(result, CaseResult)
    return str(result.details["verdict"]), result.details["findings"]


def _failing(findings: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(f["subject"], f["code"]) for f in findings if f["level"] == "fail"]


@pytest.fixture(autouse=True)
def _no_site_file(monkeypatch) -> None:
    monkeypatch.delenv(GATES_ENV, raising=False)


@pytest.mark.parametrize(("device", "node"), [(MI300X, "mi300x-healthy"),
                                              (H200, "h200-healthy")])
def test_a_healthy_node_meets_its_models_configuration_gates(monkeypatch, device, node) -> None:
    gpu_node(monkeypatch, device, node)
    for figure in CONFIGURATION:
        verdict, findings = _judge(device, figure, level=1)
        assert verdict == "pass", (figure, findings)
        assert {f["subject"] for f in findings} == {f"gpu{i}" for i in range(8)}
        assert all(f["reading"]["origin"] == "shipped" for f in findings)


def test_an_mi300x_with_an_xgmi_link_down_fails_both_ends(monkeypatch) -> None:
    gpu_node(monkeypatch, MI300X, "mi300x-xgmi-link-down")
    verdict, findings = _judge(MI300X, "links-up", level=1)
    assert verdict == "fail"
    assert _failing(findings) == [("gpu2", "ACCEL_LINK_DOWN"), ("gpu7", "ACCEL_LINK_DOWN")]
    gpu2 = next(f for f in findings if f["subject"] == "gpu2")
    assert gpu2["reading"]["value"] == 6.0 and gpu2["reading"]["threshold"] == 7.0
    assert gpu2["message"] == "links-up over xgmi 6 links: below the gate ≥ 7 links"


def test_an_h200_with_a_link_down_and_a_narrow_pcie_link_fails_by_each_gate(monkeypatch) -> None:
    gpu_node(monkeypatch, H200, "h200-nvlink-down-pcie-x8")
    assert _failing(_judge(H200, "links-up", level=1)[1]) == [("gpu4", "ACCEL_LINK_DOWN")]
    assert _failing(_judge(H200, "pcie-width", level=1)[1]) == [("gpu6", "ACCEL_PCIE_WIDTH")]
    assert _judge(H200, "pcie-gen", level=1)[0] == "pass"


def _measured(monkeypatch, values: dict[str, float], figure: str) -> None:
    """The timed figure's measurement, as the node gave it."""
    def measure(ctx, name, *, seconds, size_mib=None):
        assert name == figure and seconds > 0
        return Reading(name, values, {s: (v,) for s, v in values.items()})

    monkeypatch.setattr(figures, "measure", measure)


def test_one_slow_gpu_fails_the_gemm_gate_by_name(monkeypatch) -> None:
    gemm = {f"gpu{i}": 690.0 + i for i in range(8)} | {"gpu5": 410.0}
    _measured(monkeypatch, gemm, "gemm-bf16")
    verdict, findings = _judge(MI300X, "gemm-bf16")
    assert verdict == "fail"
    assert _failing(findings) == [("gpu5", "ACCEL_GEMM_BELOW_GATE")]
    gpu5 = next(f for f in findings if f["subject"] == "gpu5")
    assert gpu5["reading"]["threshold"] == 552.0
    assert "RVS" in gpu5["reading"]["basis"] + gpu5["reading"]["source"]
    _measured(monkeypatch, {s: v * 0.62 for s, v in gemm.items()}, "gemm-bf16")
    # The H200's bf16 gate (0.40 of 989.5) passes GPUs the MI300X's would fail.
    assert _failing(_judge(H200, "gemm-bf16")[1]) == [("gpu5", "ACCEL_GEMM_BELOW_GATE")]


def test_power_is_judged_at_level_3_and_not_below(monkeypatch) -> None:
    _measured(monkeypatch, {"gpu0": 742.0, "gpu1": 402.0}, "power")
    with pytest.raises(CaseSkipped, match="has no power gate at level 2"):
        _judge(MI300X, "power", level=2)
    assert _failing(_judge(MI300X, "power", level=3)[1]) == [("gpu1", "ACCEL_POWER_BELOW_GATE")]


def test_a_site_file_replaces_a_shipped_gate_and_says_so(monkeypatch, tmp_path) -> None:
    site = tmp_path / "site-gates.yaml"
    site.write_text(
        "format: 1\nmodels:\n  - model: AMD Instinct MI300X\n    vendor: amd\n"
        "    sources: {site: 'our acceptance test of 2026'}\n    gates:\n"
        "      - {figure: gemm-bf16, min: 400, unit: TFLOP/s, level: 2, source: site,\n"
        "         basis: our nodes run power-capped at 600 W}\n")
    monkeypatch.setenv(GATES_ENV, str(site))
    _measured(monkeypatch, {"gpu0": 690.0, "gpu5": 410.0}, "gemm-bf16")
    verdict, findings = _judge(MI300X, "gemm-bf16")
    assert verdict == "pass"
    assert all(f["reading"]["origin"].startswith("site file site-gates.yaml sha256:")
               for f in findings)


def test_which_figures_are_planned_follows_the_models_gates() -> None:
    def planned(device: DeviceInfo, level: int) -> set[str]:
        from accelbench.benchmarks.qualify.catalog import FIGURES

        return {f for f in FIGURES if applies({"figure": f, "level": level}, device)}

    assert planned(MI300X, 1) == set(CONFIGURATION)
    assert {"gemm-bf16", "memory-read", "peer", "allreduce"} <= planned(MI300X, 2)
    assert "power" not in planned(MI300X, 2) and "power" in planned(MI300X, 3)
    assert "train" in planned(H200, 4) and "train" not in planned(H200, 3)
    assert planned(CPU, 1) == {"memory-size", "gemm-fp32", "launch"}
    # A GPU with no gates: one case, to say it was not judged.
    assert planned(RTX_4090, 2) == {"memory-size"}


def test_a_gpu_with_no_gates_is_not_judged_and_says_why() -> None:
    with pytest.raises(CaseSkipped, match="not judged: no gates for 'NVIDIA GeForce RTX 4090'"):
        _judge(RTX_4090, "memory-size")


def test_a_compute_partition_is_held_to_its_share(monkeypatch) -> None:
    cpx = replace(MI300X, compute_units=38)  # one of eight, seeing all memory (NPS1)
    _measured(monkeypatch, {"gpu0": 80.0, "gpu1": 60.0}, "gemm-bf16")
    verdict, findings = _judge(cpx, "gemm-bf16")
    assert verdict == "fail"
    # 552 TFLOP/s of the whole GPU, an eighth of it for one CPX partition.
    assert [f["reading"]["threshold"] for f in findings] == [69.0, 69.0]
    assert _failing(findings) == [("gpu1", "ACCEL_GEMM_BELOW_GATE")]


def test_a_figure_whose_work_comes_out_wrong_fails_with_that_code(monkeypatch) -> None:
    def wrong(ctx, name, *, seconds, size_mib=None):
        raise CaseFailed("wrong result: gpu6's bf16 GEMM is 3% off the float64 reference")

    monkeypatch.setattr(figures, "measure", wrong)
    verdict, findings = _judge(MI300X, "gemm-bf16")
    assert verdict == "fail"
    assert _failing(findings) == [("node", "ACCEL_NUMERICS")]
    assert "gpu6's bf16 GEMM" in findings[0]["message"]
