"""The verdict of scripts/gpu-check.sh, on recorded figures: runs on any machine.

bench/gpu_expectations.py judges accelbench's headline figures beside plain-PyTorch
references against per-device ranges; bench/gpu_reference.py reads them from a store.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from accelbench.benchmarks import REGISTRY
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import Figure
from accelbench.env.fingerprint import Fingerprint
from accelbench.runner.recorder import RunRecorder
from accelbench.store import Store
from fakes import stored_measurement

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))

import gpu_energy
import gpu_expectations as ge
import gpu_reference

H200 = "NVIDIA H200 SXM"
# Figures as an H200 gives them: accelbench's and the plain reference's, base units.
OURS = {"gemm_bf16": 792e12, "d2d_copy": 4.12e12, "h2d_pinned": 53.5e9,
        "launch_eager": 5.1e-6, "launch_graph": 2.6e-6}
PLAIN = {"gemm_bf16": 788e12, "d2d_copy": 4.15e12, "h2d_pinned": 54.0e9,
         "launch_eager": 5.0e-6, "launch_graph": 2.7e-6}


def rows(judgement):
    return {row.label: row for row in judgement.rows}


def label(key):
    return next(h.label for h in ge.HEADLINES if h.key == key)


def test_a_healthy_h200_passes_every_figure():
    judgement = ge.judge(H200, OURS, PLAIN)
    assert judgement.ok and judgement.failed == 0
    assert len(judgement.rows) == len(ge.HEADLINES) + 1  # and graph below eager
    gemm = rows(judgement)[label("gemm_bf16")]
    assert gemm.ratio == pytest.approx(792 / 788)
    assert gemm.expected == "650 TFLOP/s to 990 TFLOP/s"
    assert rows(judgement)[label("launch_eager")].expected == "≤ 10.0 µs"
    assert rows(judgement)["graph / eager latency"].ours == pytest.approx(2.6 / 5.1)


@pytest.mark.parametrize("key, value, problem", [
    ("gemm_bf16", 640e12, "out of range: expected 650 TFLOP/s to 990 TFLOP/s"),
    # Above the datasheet's peak: the measurement, not the device, is wrong.
    ("gemm_bf16", 1000e12, "out of range: expected 650 TFLOP/s to 990 TFLOP/s"),
    ("d2d_copy", 3.7e12, "out of range: expected 3.80 TB/s to 4.80 TB/s"),
    ("h2d_pinned", 39e9, "out of range: expected ≥ 40.0 GB/s"),
    ("launch_eager", 11e-6, "out of range: expected ≤ 10.0 µs"),
])
def test_a_figure_outside_its_range_fails(key, value, problem):
    ours, plain = {**OURS, key: value}, {**PLAIN, key: value}  # the reference agrees
    judgement = ge.judge(H200, ours, plain)
    assert not judgement.ok and judgement.failed >= 1
    row = rows(judgement)[label(key)]
    assert row.problems == (f"{problem} (the reference too)",)


def test_an_out_of_range_figure_the_reference_does_not_share_is_said_so():
    judgement = ge.judge(H200, {**OURS, "gemm_bf16": 640e12}, PLAIN)
    (problem, disagreement) = rows(judgement)[label("gemm_bf16")].problems
    assert problem == "out of range: expected 650 TFLOP/s to 990 TFLOP/s"
    assert disagreement.startswith("disagrees with the reference: ratio 0.812")


@pytest.mark.parametrize("ratio, ok", [(0.86, True), (0.84, False), (1.14, True),
                                       (1.16, False)])
def test_accelbench_and_the_reference_must_agree_within_the_band(ratio, ok):
    ours = {**OURS, "d2d_copy": PLAIN["d2d_copy"] * ratio}
    judgement = ge.judge(None, ours, PLAIN)  # no range: only the agreement is judged
    row = rows(judgement)[label("d2d_copy")]
    assert row.ok is ok
    if not ok:
        assert row.problems == (f"disagrees with the reference: ratio {ratio:.3f} outside "
                                "[0.85, 1.15]",)


def test_graph_replay_must_cost_less_than_an_eager_launch_on_nvidia():
    judgement = ge.judge(H200, {**OURS, "launch_graph": 5.3e-6},
                         {**PLAIN, "launch_graph": 5.3e-6})
    graph = rows(judgement)["graph / eager latency"]
    assert graph.problems == ("graph replay costs 1.04x an eager launch",)
    assert [r.label for r in judgement.rows if not r.ok] == ["graph / eager latency"]


def test_rocm_devices_are_not_held_to_graph_below_eager():
    mi300x = {"gemm_bf16": 600e12, "d2d_copy": 4.2e12, "h2d_pinned": 50e9,
              "launch_eager": 8e-6, "launch_graph": 9e-6}
    judgement = ge.judge("AMD Instinct MI300X", mi300x, mi300x)
    assert judgement.ok
    assert "graph / eager latency" not in rows(judgement)


def test_an_unknown_device_gets_figures_and_agreement_but_no_range():
    slow = {key: value / 10 for key, value in OURS.items()}
    judgement = ge.judge(None, slow, {key: value / 10 for key, value in PLAIN.items()})
    assert judgement.ok and judgement.product is None
    assert all(row.expected == "-" for row in judgement.rows)
    assert len(judgement.rows) == len(ge.HEADLINES)
    assert "no expected ranges" in judgement.notes[0]


def test_a_missing_figure_fails_with_its_note():
    ours = {**OURS, "launch_graph": None}
    plain = {**PLAIN, "h2d_pinned": float("nan")}
    notes = {"launch_graph": "accelbench: failed: RuntimeError: capture"}
    judgement = ge.judge(H200, ours, plain, notes)
    graph = rows(judgement)[label("launch_graph")]
    assert graph.problems == ("accelbench gave no figure",)
    assert graph.notes == (notes["launch_graph"],)
    assert rows(judgement)[label("h2d_pinned")].problems == ("the reference gave no figure",)
    assert rows(judgement)["graph / eager latency"].problems == (
        "accelbench gave no graph or eager latency",)
    assert judgement.failed == 3


def gpu_device(name, platform="cuda", arch="sm_90", compute_units=132):
    return DeviceInfo(type="cuda", index=0, platform=platform, name=name, arch=arch,
                      compute_units=compute_units)


@pytest.mark.parametrize("device, product", [
    (gpu_device("NVIDIA H200"), "NVIDIA H200 SXM"),
    (gpu_device("NVIDIA H100 80GB HBM3"), "NVIDIA H100 SXM5"),
    (gpu_device("NVIDIA A100-SXM4-80GB", arch="sm_80", compute_units=108),
     "NVIDIA A100 SXM4 80GB"),
    (gpu_device("AMD Instinct MI300X", "rocm", "gfx942", 304), "AMD Instinct MI300X"),
    (gpu_device("AMD Instinct MI250X", "rocm", "gfx90a", 110), "AMD Instinct MI250X"),
    # One CPX partition of an MI300X is an eighth of the package: no range is for it.
    (gpu_device("AMD Instinct MI300X", "rocm", "gfx942", 38), None),
    (gpu_device("NVIDIA H100 PCIe"), None),  # a published peak, but no range here
    (gpu_device("NVIDIA GeForce RTX 4090", arch="sm_89"), None),
    (DeviceInfo(type="cpu", index=None, platform="cpu", name="AMD EPYC"), None),
])
def test_the_product_is_found_as_the_peak_table_finds_it(device, product):
    assert ge.product_for(device) == product


def case(bench, device="cuda:0", **params):
    benchmark = REGISTRY.get(bench)
    return benchmark.case(benchmark.resolve(params), device)


def figure_measurement(bench, name, value, unit, status="ok", **params):
    higher = unit != "s"
    return stored_measurement(case(bench, **params), status, samples=(1e-3,) * 3,
                              figures=(Figure(name, value, unit, higher),))


def quick_run_measurements():
    """The headline cases as the quick suite stores them, among others."""
    return [
        figure_measurement("gemm", "throughput", 1e12, "FLOP/s", shape="8192", dtype="fp16"),
        figure_measurement("gemm", "throughput", 7.9e14, "FLOP/s", shape="8192", dtype="bf16"),
        figure_measurement("gemm", "throughput", 7e14, "FLOP/s", shape="bert-base.ffn-up",
                           dtype="bf16"),
        figure_measurement("memory", "bandwidth", 4.1e12, "B/s", op="copy", size_mib=1024),
        figure_measurement("memory", "bandwidth", 3.9e12, "B/s", op="triad", size_mib=1024),
        figure_measurement("memory", "transfer_rate", 53e9, "B/s", op="h2d", size_mib=256),
        figure_measurement("memory", "transfer_rate", 20e9, "B/s", op="h2d", size_mib=256,
                           pinned=False),
        figure_measurement("launch", "latency", 5e-6, "s", mode="eager"),
        stored_measurement(case("launch", mode="graph"), "failed",
                           reason="RuntimeError: graph capture failed"),
    ]


def test_the_headline_figures_are_read_from_the_quick_suites_cases():
    figures, notes = ge.accelbench_figures(quick_run_measurements())
    assert figures == {"gemm_bf16": 7.9e14, "d2d_copy": 4.1e12, "h2d_pinned": 53e9,
                       "launch_eager": 5e-6, "launch_graph": None}
    assert notes == {"launch_graph": "accelbench: failed: RuntimeError: graph capture failed"}


def test_a_headline_case_missing_from_the_run_is_noted():
    figures, notes = ge.accelbench_figures(quick_run_measurements()[:3])
    assert figures["gemm_bf16"] == 7.9e14 and figures["d2d_copy"] is None
    assert notes["d2d_copy"] == "accelbench: the run has no such case"


def test_a_figure_measured_on_a_busy_host_is_noted_but_counts():
    busy = stored_measurement(case("launch", mode="eager"), "ok", samples=(1e-3,),
                              figures=(Figure("latency", 5e-6, "s", False),),
                              hosts=({"contended": True, "reasons": ["load 9"]},))
    figures, notes = ge.accelbench_figures([busy])
    assert figures["launch_eager"] == 5e-6
    assert notes["launch_eager"] == "accelbench: measured contended"


def test_the_verdict_renders_as_a_table_and_as_json():
    judgement = ge.judge(H200, {**OURS, "d2d_copy": 3.0e12}, {**PLAIN, "d2d_copy": 3.1e12})
    text = ge.render(judgement, "accelbench run X on NVIDIA H200")
    lines = text.splitlines()
    assert lines[0] == "accelbench run X on NVIDIA H200"
    assert lines[2] == "| figure | accelbench | plain PyTorch | ratio | expected | verdict |"
    copy = next(line for line in lines if line.startswith(f"| {label('d2d_copy')} |"))
    assert "| 3.00 TB/s | 3.10 TB/s | 0.968 | 3.80 TB/s to 4.80 TB/s | FAIL: out of range" in copy
    assert lines[-1] == "GPU figures: 5 of 6 pass, 1 FAIL"
    data = json.loads(json.dumps(ge.to_dict(judgement)))
    assert data["product"] == H200 and data["ok"] is False
    assert [r["ok"] for r in data["rows"]].count(False) == 1


def stored_run(tmp_path, device, measurements=()):
    """A store holding one run measured on `device`."""
    fingerprint = Fingerprint(device, {"platform": device.platform,
                                       "torch": {"version": "2.14.1"}})
    path = tmp_path / "results.sqlite"
    with Store.open(path) as store:
        recorder = RunRecorder(store, fingerprint, "quick", ["run"])
        for index, m in enumerate(measurements):
            recorder.record(index, m)
        recorder.finish()
    return path


def test_the_reference_refuses_a_run_measured_on_the_cpu(tmp_path, capsys):
    cpu = DeviceInfo(type="cpu", index=None, platform="cpu", name="AMD EPYC")
    assert gpu_reference.main(["--store", str(stored_run(tmp_path, cpu))]) == 2
    assert "not on a GPU" in capsys.readouterr().err


def test_the_reference_refuses_a_missing_store(tmp_path, capsys):
    assert gpu_reference.main(["--store", str(tmp_path / "none.sqlite")]) == 2
    assert capsys.readouterr().err.startswith("gpu_reference: error: ")


def test_without_a_gpu_the_reference_says_so_with_its_own_exit_code(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    path = stored_run(tmp_path, gpu_device("NVIDIA H200"), quick_run_measurements())
    assert gpu_reference.main(["--store", str(path)]) == 4
    assert "no GPU" in capsys.readouterr().err


def test_each_headline_is_one_case_of_the_quick_suites_gpu_grid():
    from accelbench.core.request import RunRequest
    from accelbench.runner.plan import expand, validate

    planned = expand(validate(RunRequest(), REGISTRY), gpu_device("NVIDIA H200"))
    for headline in ge.HEADLINES:
        matching = [p for p in planned if p.case.benchmark == headline.benchmark and all(
            p.case.param_dict.get(k) == v for k, v in headline.params.items())]
        assert len(matching) == 1, (headline.key, [p.case.label for p in matching])


# --- the energy counter against the power integrals ------------------------------------------

def test_the_power_integral_is_the_trapezoid_over_the_window_with_its_ends_held():
    samples = [(0.5, 100.0), (1.0, 300.0), (1.5, 300.0), (9.0, 0.0)]
    # [0, 0.5] at the first sample's 100 W, then trapezoids up to the window's end at 1.5.
    assert gpu_energy.integrate(samples, 0.0, 1.5) == pytest.approx(50 + 100 + 150)
    assert gpu_energy.integrate(samples[:1], 0.0, 1.5) is None


def windows(short_average=1650.0, long_average=6900.0, instant=1395.0):
    return [gpu_energy.EnergyWindow(2.0, 1400.0, instant, short_average),
            gpu_energy.EnergyWindow(10.0, 7000.0, 6990.0, long_average)]


def test_a_counter_that_agrees_with_instant_power_passes_and_the_short_average_is_told():
    rows = {r.label: r for r in ge.judge_energy(windows(short_average=1150.0))}
    assert all(r.ok for r in rows.values())
    assert rows["instant power, 2 s"].ratio == pytest.approx(1400 / 1395)
    # 1400 J on the counter over 1150 J of averaged power: the lag of a 1 s average.
    assert rows["averaged power, 2 s"].notes == ("confirms a reading averaged over about a "
                                                 "second",)


def test_a_short_averaged_window_that_agrees_refutes_the_averaging_without_failing():
    row = {r.label: r for r in ge.judge_energy(windows(short_average=1400.0))}[
        "averaged power, 2 s"]
    assert row.ok and row.notes == ("refutes a reading averaged over about a second",)


@pytest.mark.parametrize("change, label", [
    ({"instant": 1200.0}, "instant power, 2 s"),
    ({"long_average": 5900.0}, "averaged power, 10 s"),
])
def test_a_counter_off_its_power_integral_fails(change, label):
    rows = {r.label: r for r in ge.judge_energy(windows(**change))}
    assert not rows[label].ok and "outside" in rows[label].problems[0]
    judgement = ge.Judgement("NVIDIA H200 SXM", (), energy=tuple(rows.values()))
    assert judgement.failed == 1 and "1 FAIL" in ge.render(judgement, "t")


def test_no_instant_power_is_said_but_no_energy_counter_fails():
    rows = ge.judge_energy([gpu_energy.EnergyWindow(10.0, 7000.0, None, 6950.0)])
    assert rows[0].ok and rows[0].notes == ("the driver gives no instantaneous power",)
    assert ge.judge_energy([gpu_energy.EnergyWindow(10.0, None, 7000.0, 6950.0)])[0].problems
    (none,) = ge.judge_energy([], "no energy readings: ModuleNotFoundError: pynvml")
    assert none.problems == ("no energy readings: ModuleNotFoundError: pynvml",)


class FakeNvml:
    """nvidia-ml-py's calls the energy check makes, on a GPU that gives instant power only
    on request of its field."""

    NVML_SUCCESS, NVML_ERROR_NOT_SUPPORTED = 0, 3

    def __init__(self, instant_supported=True):
        self.instant_supported = instant_supported
        self.opened_by = None

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetHandleByUUID(self, uuid):
        self.opened_by = uuid
        return "h"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        return 123_456  # mJ

    def nvmlDeviceGetPowerUsage(self, handle):
        return 650_000  # mW

    def nvmlDeviceGetFieldValues(self, handle, fields):
        assert fields == [gpu_energy.NVML_FI_DEV_POWER_INSTANT]
        value = type("V", (), {})()
        value.nvmlReturn = self.NVML_SUCCESS if self.instant_supported else 3
        value.value = type("U", (), {"uiVal": 700_500})()
        return [value]


@pytest.mark.parametrize("supported, instant", [(True, 700.5), (False, None)])
def test_nvml_is_read_for_the_torch_device_by_its_uuid(monkeypatch, supported, instant):
    fake = FakeNvml(supported)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    props = type("P", (), {"uuid": "8c2f-uuid"})()
    torch = type("T", (), {"cuda": type("C", (), {
        "get_device_properties": staticmethod(lambda i: props)})})
    source = gpu_energy.nvml_source(torch, 0)
    assert fake.opened_by == "GPU-8c2f-uuid"
    assert source.energy_j() == pytest.approx(123.456)
    assert source.average_w() == pytest.approx(650.0)
    assert source.instant_w() == (pytest.approx(instant) if instant else None)
