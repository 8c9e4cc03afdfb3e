"""The figures a node is qualified on, measured: for real on this CPU (briefly, values
only checked to be positive and finite, never against a speed), and on GPU nodes from
recorded amdsmi and NVML readings and faked device properties."""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from qualify_nodes import gpu_node as _gpu_node

from accelbench.benchmarks.health import sysfs
from accelbench.benchmarks.health.topology import direct_links
from accelbench.benchmarks.qualify import catalog, figures, figures_base, figures_power
from accelbench.benchmarks.qualify.figures import Reading, measure
from accelbench.benchmarks.qualify.figures_copy import bus_bandwidth, pair_kind
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseSkipped
from accelbench.core.telemetry import GFX_CLOCK_MHZ, POWER_W, THROTTLE, Series
from accelbench.core.timing import PerfCounterClock, TimingPolicy
from accelbench.env.pcie import Link
from gpu_fakes import FakeAmdSmi, FakeNvml, importer_of, load_node

pytestmark = pytest.mark.torch_api

CPU = DeviceInfo(type="cpu", index=None, platform="cpu", name="cpu")
MI300X = DeviceInfo(type="cuda", index=0, platform="rocm", name="AMD Instinct MI300X",
                    arch="gfx942", memory_bytes=192 << 30)
H100 = DeviceInfo(type="cuda", index=0, platform="cuda", name="NVIDIA H100 80GB HBM3",
                  arch="sm_90", memory_bytes=80 << 30)
A100 = DeviceInfo(type="cuda", index=0, platform="cuda", name="NVIDIA A100-SXM4-80GB",
                  arch="sm_80", memory_bytes=80 << 30)
SECONDS = 0.3


def _ctx(device: DeviceInfo = CPU) -> CaseContext:
    return CaseContext(device, PerfCounterClock(), TimingPolicy())


def _finite_positive(reading: Reading, subjects: set[str]) -> None:
    assert set(reading.values) == subjects
    assert all(math.isfinite(v) and v > 0 for v in reading.values.values())


def _timed_on_cpu(reading: Reading, figure: str) -> None:
    _finite_positive(reading, {"cpu"})
    assert reading.figure == figure
    assert len(reading.samples["cpu"]) >= 1
    assert all(math.isfinite(s) and s > 0 for s in reading.samples["cpu"])
    assert reading.cores == torch.get_num_threads()
    assert reading.details["derived"]


# ----------------------------------------------------------------- real on the CPU


def test_the_host_memory_is_the_cpu_memory_size() -> None:
    reading = measure(_ctx(), "memory-size", seconds=SECONDS)
    _finite_positive(reading, {"cpu"})
    assert reading.samples == {"cpu": ()}  # read, not timed
    assert reading.details["bytes"]["cpu"] == figures.host_memory_bytes()
    assert catalog.kind("memory-size").unit == "GiB"
    assert reading.values["cpu"] == reading.details["bytes"]["cpu"] / (1 << 30)


def test_an_fp32_gemm_runs_checked_on_this_cpu() -> None:
    reading = measure(_ctx(), "gemm-fp32", seconds=SECONDS)
    _timed_on_cpu(reading, "gemm-fp32")
    assert 128 <= reading.details["n"]["cpu"] <= 4096
    assert reading.details["checks"]["cpu"]["tf32_in_effect"] is False
    assert reading.details["checks"]["cpu"]["check_rel_error_full"] <= 1e-5
    # The value is the median of the samples, each in TFLOP/s.
    ordered = sorted(reading.samples["cpu"])
    assert ordered[0] <= reading.values["cpu"] <= ordered[-1]


@pytest.mark.parametrize("figure", ["memory-read", "memory-write", "memory-copy"])
def test_memory_bandwidth_runs_on_this_cpu(figure: str) -> None:
    reading = measure(_ctx(), figure, seconds=SECONDS, size_mib=16)
    _timed_on_cpu(reading, figure)
    assert reading.details["buffer_mib"] == 16
    assert reading.details["bytes_per_call"].startswith("2 *" if figure == "memory-copy"
                                                        else "1 *")


def test_the_memory_buffer_is_beyond_the_caches_unless_asked() -> None:
    from accelbench.benchmarks.qualify.figures_compute import memory_mib
    from accelbench.runner.devices import cpu_llc_bytes

    assert memory_mib(_ctx(), None) >= max(256, 4 * cpu_llc_bytes() >> 20)
    assert memory_mib(_ctx(), 3.4) == 3
    gpu = DeviceInfo(type="cuda", index=0, platform="rocm", name="MI300X", arch="gfx942",
                     l2_cache_bytes=256 << 20)
    assert memory_mib(_ctx(gpu), None) == 2048  # 8x the cache where that is more than 1 GiB


def test_the_cpu_operator_dispatch_is_the_launch_figure() -> None:
    reading = measure(_ctx(), "launch", seconds=SECONDS)
    _timed_on_cpu(reading, "launch")
    assert catalog.kind("launch").unit == "us"
    assert reading.values["cpu"] < 1e6  # microseconds per call, not seconds


@pytest.mark.slow  # importing transformers takes seconds
def test_a_small_transformer_trains_on_this_cpu() -> None:
    reading = measure(_ctx(), "train", seconds=SECONDS)
    _timed_on_cpu(reading, "train")
    run = reading.details["runs"]["cpu"]
    assert run["steps"] >= 1 and run["tokens_per_s"] > 0
    assert "6*N" in reading.details["flop_formula"]
    expected = reading.details["flop_per_step"] * run["steps"] / run["seconds"] / 1e12
    assert reading.values["cpu"] == pytest.approx(expected)


@pytest.mark.parametrize(("figure", "reason"), [
    ("pcie-gen", "the CPU has no such link"),
    ("pcie-width", "the CPU has no such link"),
    ("links-up", "the CPU has none"),
    ("peer", "the CPU has no device memory"),
    ("allreduce", "the CPU has no device memory"),
    ("h2d", "the CPU has no device memory"),
    ("d2h", "the CPU has no device memory"),
    ("dma-bidir", "the CPU has no device memory"),
    ("gemm-fp8", "fp8 matrix multiply needs a GPU"),
    ("gemm-tf32", "tf32 is a GPU matrix-core mode"),
])
def test_figures_that_do_not_apply_to_the_cpu_say_why(figure: str, reason: str) -> None:
    with pytest.raises(CaseSkipped, match=reason):
        measure(_ctx(), figure, seconds=SECONDS)


def test_an_unknown_figure_or_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown figure 'gemm-fp4'"):
        measure(_ctx(), "gemm-fp4", seconds=SECONDS)
    with pytest.raises(ValueError, match="seconds must be positive"):
        measure(_ctx(), "launch", seconds=0)


def test_every_catalog_figure_has_a_measurer() -> None:
    for name in catalog.FIGURES:
        assert callable(figures._measurer(name))


# ------------------------------------------------------------------ CPU power (RAPL)


def test_cpu_power_without_rapl_is_skipped_with_the_reason(monkeypatch) -> None:
    monkeypatch.setattr("accelbench.env.telemetry.host.find_rapl",
                        lambda sysfs="/sys": ([], "no /sys/class/powercap (no RAPL powercap: "
                                                  "usual in a VM)"))
    with pytest.raises(CaseSkipped, match="no CPU power reading: no /sys/class/powercap"):
        measure(_ctx(), "power", seconds=SECONDS)


@contextlib.contextmanager
def _counter(path: Path, watts: float) -> Iterator[None]:
    """A RAPL energy counter (microjoules) that a thread advances at `watts`."""
    stop = threading.Event()
    started = time.perf_counter()
    path.write_text("0\n")

    def run() -> None:
        while not stop.wait(0.005):
            path.write_text(f"{int((time.perf_counter() - started) * watts * 1e6)}\n")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def test_cpu_power_is_read_from_the_package_energy_counter(monkeypatch, tmp_path) -> None:
    energy = tmp_path / "energy_uj"
    monkeypatch.setattr("accelbench.env.telemetry.host.find_rapl",
                        lambda sysfs="/sys": ([(energy, 1 << 40)], None))
    with _counter(energy, 150.0):
        reading = measure(_ctx(), "power", seconds=0.5)
    _finite_positive(reading, {"cpu"})
    assert reading.values["cpu"] == pytest.approx(150.0, rel=0.5)
    assert reading.details["readings"] >= 1 and reading.samples["cpu"]


# --------------------------------------------------------- GPU nodes, from recordings


GPUS8 = {f"gpu{i}" for i in range(8)}


def test_every_gpu_of_an_mi300x_node_has_its_memory_size(monkeypatch) -> None:
    _gpu_node(monkeypatch, MI300X, "mi300x-healthy")
    reading = measure(_ctx(MI300X), "memory-size", seconds=SECONDS)
    assert reading.values == {s: 192.0 for s in GPUS8}
    assert reading.samples == {s: () for s in GPUS8}


@pytest.mark.parametrize(("device", "node"), [(MI300X, "mi300x-healthy"),
                                              (H100, "h100-sxm-healthy")])
def test_pcie_gen5_x16_on_every_gpu_from_the_vendor_library(monkeypatch, device, node) -> None:
    _gpu_node(monkeypatch, device, node)
    gen = measure(_ctx(device), "pcie-gen", seconds=SECONDS)
    width = measure(_ctx(device), "pcie-width", seconds=SECONDS)
    assert gen.values == {s: 5.0 for s in GPUS8}
    assert width.values == {s: 16.0 for s in GPUS8}
    assert set(gen.details["source"].values()) == {"amdsmi" if device is MI300X else "nvml"}
    assert gen.details["read_under_load"] is True


def test_a_downgraded_pcie_link_reads_as_it_trained(monkeypatch) -> None:
    _gpu_node(monkeypatch, H100, "h100-sxm-pcie-downgraded")
    gen = measure(_ctx(H100), "pcie-gen", seconds=SECONDS)
    width = measure(_ctx(H100), "pcie-width", seconds=SECONDS)
    assert gen.values["gpu5"] == 4.0 and width.values["gpu5"] == 8.0
    assert gen.values["gpu4"] == 5.0 and width.values["gpu4"] == 16.0


def test_pcie_falls_back_to_sysfs_where_no_library_answers(monkeypatch) -> None:
    addresses = load_node("mi300x-healthy")["gpus"]
    links = {str(g["amdsmi_get_gpu_device_bdf"]): Link(16.0, 16, 32.0, 16) for g in addresses}
    _gpu_node(monkeypatch, MI300X, "mi300x-healthy", library=False, links=links)
    gen = measure(_ctx(MI300X), "pcie-gen", seconds=SECONDS)
    assert gen.values == {s: 4.0 for s in GPUS8}
    assert set(gen.details["source"].values()) == {"sysfs"}
    assert gen.details["max"]["gpu0"] == 5


def test_pcie_with_neither_library_nor_sysfs_is_skipped(monkeypatch) -> None:
    _gpu_node(monkeypatch, MI300X, "mi300x-healthy", library=False)
    with pytest.raises(CaseSkipped, match=r"no PCIe link generation could be read: .*amdsmi"):
        measure(_ctx(MI300X), "pcie-gen", seconds=SECONDS)


def test_seven_xgmi_links_up_on_every_mi300x(monkeypatch) -> None:
    _gpu_node(monkeypatch, MI300X, "mi300x-healthy")
    reading = measure(_ctx(MI300X), "links-up", seconds=SECONDS)
    assert reading.values == {s: 7.0 for s in GPUS8}
    assert reading.links == {s: "xgmi" for s in GPUS8}


def test_a_gpu_with_a_link_down_shows_six(monkeypatch) -> None:
    _gpu_node(monkeypatch, MI300X, "mi300x-xgmi-link-down")
    reading = measure(_ctx(MI300X), "links-up", seconds=SECONDS)
    assert reading.values["gpu2"] == reading.values["gpu7"] == 6.0
    assert reading.values["gpu0"] == 7.0
    assert "down" in reading.details["states"]["gpu2"].values()


def test_partitions_whose_link_states_read_na_are_not_counted(monkeypatch) -> None:
    _gpu_node(monkeypatch, MI300X, "mi300x-healthy")
    read, found = figures._readings(_ctx(MI300X))
    # as in CPX mode: the second GPU's partition sees none of its device's link states
    second = found[1]
    found[1] = replace(second, links=tuple(
        replace(link, state=None) for link in second.links))
    monkeypatch.setattr(figures, "_readings", lambda ctx: (read, found))
    reading = measure(_ctx(MI300X), "links-up", seconds=SECONDS)
    assert "gpu1" not in reading.values and reading.values["gpu0"] == 7.0
    assert "secondary compute partition" in reading.details["not_counted"]["gpu1"]


def test_nvlinks_up_on_every_h100(monkeypatch) -> None:
    _gpu_node(monkeypatch, H100, "h100-sxm-healthy")
    reading = measure(_ctx(H100), "links-up", seconds=SECONDS)
    assert reading.values == {s: 18.0 for s in GPUS8}
    assert reading.links == {s: "nvlink" for s in GPUS8}


def test_links_unread_are_skipped_with_the_library_reason(monkeypatch) -> None:
    _gpu_node(monkeypatch, H100, "h100-sxm-healthy", library=False)
    with pytest.raises(CaseSkipped, match=r"no GPU-to-GPU link could be read: .*pynvml"):
        measure(_ctx(H100), "links-up", seconds=SECONDS)


def test_fp8_gemm_is_skipped_where_the_gpu_has_none() -> None:
    with pytest.raises(CaseSkipped, match=r"fp8 needs compute capability 8\.9"):
        measure(_ctx(A100), "gemm-fp8", seconds=SECONDS)


@pytest.mark.parametrize("figure", ["peer", "allreduce"])
def test_pairs_and_collectives_need_two_gpus(monkeypatch, figure: str) -> None:
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(CaseSkipped, match=f"{figure} needs at least 2 GPUs; this node has 1"):
        measure(_ctx(H100), figure, seconds=SECONDS)


@pytest.mark.parametrize(("device", "node", "kind"), [(MI300X, "mi300x-healthy", "xgmi"),
                                                      (H100, "h100-sxm-healthy", "nvlink")])
def test_every_pair_of_gpus_is_joined_by_the_node_s_link(device, node, kind) -> None:
    recorded = load_node(node)
    amd = device is MI300X
    lib = FakeAmdSmi(recorded) if amd else FakeNvml(recorded)
    links = direct_links("amd" if amd else "nvidia",
                         importer=importer_of({"amdsmi" if amd else "pynvml": lib}))
    assert links.read
    addresses = sorted({p.a for p in links.pairs} | {p.b for p in links.pairs})
    assert len(addresses) == 8
    assert {pair_kind(links.pairs, a, b) for a in addresses for b in addresses
            if a != b} == {kind}
    assert pair_kind(links.pairs, addresses[0], "0000:ff:00.0") == "pcie"


# -------------------------------------------------------- derivations of GPU figures


def test_allreduce_bus_bandwidth_is_nccl_tests_definition() -> None:
    # 1 GiB in 10 ms over 8 GPUs: algbw 107.4 GB/s, busbw 2*7/8 of it.
    assert bus_bandwidth(1 << 30, 0.01, 8) == pytest.approx((1 << 30) / 0.01 * 14 / 8)
    assert bus_bandwidth(1 << 30, 0.01, 2) == pytest.approx((1 << 30) / 0.01)


def test_sustained_power_is_the_p90_after_the_warmup_third() -> None:
    t = [i * 0.1 for i in range(31)]  # 3 s of readings, the load from 0 to 3 s
    watts: list[float | None] = [100.0] * 10
    watts += [float(w) for w in range(700, 721)]
    found = figures_power.sustained(t, watts, 0.0, 3.0)
    assert found is not None
    value, seen = found
    kept = [float(w) for w in range(700, 721)]
    assert seen["readings"] == len(kept) and seen["max"] == 720.0
    assert value == pytest.approx(figures_power.percentile(kept, 90)) == pytest.approx(718.0)
    assert figures_power.sustained(t, [None] * 31, 0.0, 3.0) is None


def test_power_from_an_energy_counter_unwraps_it() -> None:
    times, watts = figures_power.watts_from_energy([0.0, 1.0, 2.0, 3.0],
                                                   [10.0, 110.0, 5.0, None], wrap_j=205.0)
    assert times == [1.0, 2.0] and watts == [100.0, 100.0]  # 110 -> 5 wrapped at 205 J


def test_the_clocks_and_throttle_reasons_under_load_are_kept() -> None:
    series = Series(0.1, (0.0, 1.0, 2.0), {GFX_CLOCK_MHZ: (2100.0, 1900.0, 1800.0),
                                           THROTTLE: (0.0, 4.0, 5.0)},
                    throttle_names={0: "GpuIdle", 2: "SwPowerCap"})
    seen = figures_power.throttle_seen(series, 1.0)
    assert seen["gfx_clock_mhz_median"] == 1850.0 and seen["gfx_clock_mhz_min"] == 1800.0
    assert seen["throttle_reasons"] == ["GpuIdle", "SwPowerCap"]


def test_the_budget_is_shared_between_the_subjects() -> None:
    assert figures_base.share_of(3.0, 8) == pytest.approx(0.375)
    assert figures_base.share_of(0.1, 56) == figures_base.MIN_SHARE_S
    policy = figures_base.budget_policy(TimingPolicy(), 0.375)
    assert policy.max_time == pytest.approx(0.15)
    assert policy.warmup_time == pytest.approx(0.0375)
    assert policy.block_time <= policy.max_time / 10
    assert not policy.flush_cache and policy.processes == 1


def test_a_reading_is_json_able() -> None:
    import json

    reading = Reading("peer", {"gpu0-gpu1": 50.0}, {"gpu0-gpu1": (49.0, 50.0, 51.0)},
                      {"gpu0-gpu1": "xgmi"}, {"bytes": 1 << 28})
    assert json.loads(json.dumps(reading.to_dict()))["links"] == {"gpu0-gpu1": "xgmi"}


# ------------------------------------ GPU orchestration, the device work faked out


def _no_device_work(monkeypatch, module: Any) -> None:
    """The per-GPU context and current-device switch of `module` left out: the faked
    device work below needs neither."""
    monkeypatch.setattr(module, "device_context", lambda ctx, index, share, **_: ctx)
    monkeypatch.setattr(module, "on_device", lambda index: contextlib.nullcontext())


def test_each_ordered_pair_is_copied_alone_with_its_link_kind(monkeypatch) -> None:
    from accelbench.benchmarks.health import copy_paths, topology
    from accelbench.benchmarks.qualify import figures_copy

    _gpu_node(monkeypatch, MI300X, "mi300x-healthy")
    _no_device_work(monkeypatch, figures_copy)
    monkeypatch.setattr(torch.cuda, "can_device_access_peer", lambda a, b: True)
    monkeypatch.setattr(topology, "direct_links", lambda vendor: direct_links(
        vendor, importer=importer_of({"amdsmi": FakeAmdSmi(load_node("mi300x-healthy"))})))
    copied: list[tuple[int, int]] = []

    def device_path(torch_: Any, ctx: CaseContext, a: int, b: int, nbytes: int) -> Any:
        copied.append((a, b))
        rate = 40e9 if (a, b) == (2, 5) else 50e9
        return copy_paths.CopyPath("d2d", f"gpu{a}", f"gpu{b}", nbytes,
                                   (nbytes / rate, nbytes / rate * 1.1, nbytes / rate * 0.9))

    monkeypatch.setattr(copy_paths, "device_path", device_path)
    reading = measure(_ctx(MI300X), "peer", seconds=SECONDS, size_mib=64)
    assert len(copied) == len(set(copied)) == 56  # every ordered pair, once each
    assert set(reading.values) == {f"gpu{a}-gpu{b}" for a, b in copied}
    assert reading.values["gpu2-gpu5"] == pytest.approx(40.0)
    assert reading.values["gpu5-gpu2"] == pytest.approx(50.0)  # a direction is its own
    assert reading.links == {s: "xgmi" for s in reading.values}
    assert reading.details["bytes"] == 64 << 20 and "links_missing" not in reading.details


def test_each_gpu_s_host_link_uses_its_nearest_numa_node(monkeypatch) -> None:
    from accelbench.benchmarks.health import copy_paths
    from accelbench.benchmarks.qualify import figures_copy

    addresses = _gpu_node(monkeypatch, H100, "h100-sxm-healthy")
    _no_device_work(monkeypatch, figures_copy)
    mine = tuple(sorted(os.sched_getaffinity(0)))
    monkeypatch.setattr(sysfs, "pci_devices", lambda: tuple(
        sysfs.PciDevice(a, 0x0302, 0x10DE, 0x2330, 0 if i < 4 else 1, ("pci0000:00", a),
                        None, "nvidia") for i, a in enumerate(addresses)))
    monkeypatch.setattr(sysfs, "numa_nodes", lambda: (
        sysfs.NumaNode(0, mine, None, None, (10, 32)),
        sysfs.NumaNode(1, mine, None, None, (32, 10))))
    asked: list[tuple[int, int, bool]] = []

    def host_device_path(torch_: Any, ctx: CaseContext, node: int, cpus: Any, device: int,
                         to_device: bool, nbytes: int) -> Any:
        asked.append((device, node, to_device))
        return copy_paths.CopyPath("h2d" if to_device else "d2h", f"node{node}",
                                   f"gpu{device}", nbytes, (nbytes / 55e9,) * 3, f"node{node}")

    monkeypatch.setattr(copy_paths, "host_device_path", host_device_path)
    reading = measure(_ctx(H100), "d2h", seconds=SECONDS)
    assert asked == [(i, 0 if i < 4 else 1, False) for i in range(8)]
    assert reading.values == {s: pytest.approx(55.0) for s in GPUS8}
    assert reading.details["numa_node"]["gpu5"] == 1 and reading.details["pinned"]
    assert reading.details["placed"]["gpu5"] == "node1"


def _two_gpus_gemm(monkeypatch, measured: Any) -> None:
    from accelbench.benchmarks.micro import gemm
    from accelbench.benchmarks.qualify import figures_compute

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(figures_compute, "device_context",
                        lambda ctx, index, share, **_: replace(ctx, device=replace(
                            ctx.device, index=index)))
    monkeypatch.setattr(figures_compute, "on_device", lambda index: contextlib.nullcontext())
    monkeypatch.setattr(figures_compute, "gemm_size", lambda *a: 8192)
    monkeypatch.setattr(gemm, "measure", measured)


def test_every_gpu_runs_the_checked_gemm_and_keeps_its_samples(monkeypatch) -> None:
    from accelbench.core.measurement import CaseResult, Rate
    from accelbench.core.timing import Timing

    flop = 2.0 * 8192 ** 3

    def measured(ctx: CaseContext, params: Any) -> CaseResult:
        assert (params.shape, params.dtype, params.batch) == ("8192", "bf16", 1)
        seconds = flop / (600e12 if ctx.device.index == 0 else 300e12)
        return CaseResult(Timing((seconds, seconds * 1.01, seconds * 0.99), 1, 2, "converged"),
                          (Rate("throughput", flop, "FLOP/s"),),
                          details={"check_rel_error_full": 1e-3})

    _two_gpus_gemm(monkeypatch, measured)
    reading = measure(_ctx(H100), "gemm-bf16", seconds=SECONDS)
    assert reading.values == {"gpu0": pytest.approx(600.0), "gpu1": pytest.approx(300.0)}
    assert len(reading.samples["gpu1"]) == 3 and reading.details["n"] == {"gpu0": 8192,
                                                                          "gpu1": 8192}
    assert reading.details["checks"]["gpu0"] == {"check_rel_error_full": 1e-3}


def test_an_fp8_gemm_pytorch_cannot_run_is_skipped_not_failed(monkeypatch) -> None:
    def measured(ctx: CaseContext, params: Any) -> Any:
        raise RuntimeError("_scaled_mm is not supported on this device")

    _two_gpus_gemm(monkeypatch, measured)
    with pytest.raises(CaseSkipped, match=r"fp8 matmul \(torch._scaled_mm\) does not run on "
                                          r"NVIDIA H100 80GB HBM3: _scaled_mm is not supported"):
        measure(_ctx(H100), "gemm-fp8", seconds=SECONDS)
    with pytest.raises(RuntimeError, match="not supported"):  # other dtypes: an error
        measure(_ctx(H100), "gemm-bf16", seconds=SECONDS)


class _FakePower:
    """A vendor telemetry source that reads a steady board power."""

    name = "nvml"

    def __init__(self, watts: float) -> None:
        self.watts = watts
        self.throttle_names = {2: "SwPowerCap"}

    def read(self) -> dict[str, float | None]:
        return {POWER_W: self.watts, GFX_CLOCK_MHZ: 1980.0, THROTTLE: 4.0}

    def close(self) -> None:
        pass


def _gpu_power_node(monkeypatch, gpus: int, sources: bool = True) -> list[int]:
    from accelbench.benchmarks.micro import gemm

    launched: list[int] = []
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(torch.cuda, "device", lambda index: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda index=None: time.sleep(0.002))
    monkeypatch.setattr("accelbench.env.telemetry.vendor_index", lambda index: index)
    monkeypatch.setattr("accelbench.env.telemetry.open_sources", lambda kind, index, include: (
        ([_FakePower(300.0 + 100 * index)], {}) if sources
        else ([], {"nvml": "NVML Shared Library Not Found"})))
    monkeypatch.setattr(gemm, "make_operands", lambda torch_, device, *a, **k: SimpleNamespace(
        call=lambda: launched.append(device.index)))
    return launched


def test_every_gpu_s_power_is_read_under_a_gemm_load_on_all_at_once(monkeypatch) -> None:
    launched = _gpu_power_node(monkeypatch, gpus=2)
    reading = measure(_ctx(H100), "power", seconds=0.3)
    assert reading.values == {"gpu0": pytest.approx(300.0), "gpu1": pytest.approx(400.0)}
    assert launched.count(0) == launched.count(1) > 0  # both loaded, in turn
    seen = reading.details["per_gpu"]["gpu1"]
    assert seen["readings"] >= 1 and seen["max"] == 400.0
    assert seen["throttle_reasons"] == ["SwPowerCap"] and seen["gfx_clock_mhz_median"] == 1980
    assert 0.3 <= reading.details["load_s"] < 0.6
    assert all(w == 400.0 for w in reading.samples["gpu1"])


def test_gpu_power_without_a_reading_is_skipped_with_the_reason(monkeypatch) -> None:
    _gpu_power_node(monkeypatch, gpus=2, sources=False)
    with pytest.raises(CaseSkipped, match="no GPU power reading: gpu0: nvml: NVML Shared"):
        measure(_ctx(H100), "power", seconds=0.3)


# ------------------------------------------------------ on a real GPU (pytest -m gpu)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU: torch.cuda.is_available() "
                    "is False; run with pytest -m gpu on a CUDA or ROCm node")
@pytest.mark.parametrize("figure", catalog.FIGURES)
def test_every_figure_of_every_gpu_on_this_node(figure: str) -> None:
    from accelbench.env.fingerprint import select_device
    from accelbench.runner.devices import make_clock

    device = select_device(torch, "cuda:0", {}, os.environ)
    ctx = CaseContext(device, make_clock(device), TimingPolicy())
    try:
        reading = measure(ctx, figure, seconds=1.0, size_mib=64)
    except CaseSkipped as skipped:
        assert str(skipped)  # a figure that does not apply says why
        pytest.skip(f"{figure}: {skipped}")
    kind = catalog.kind(figure)
    count = torch.cuda.device_count()
    expected = {"node"} if kind.per == "node" else (
        {f"gpu{a}-gpu{b}" for a in range(count) for b in range(count) if a != b}
        if kind.per == "pair" else {f"gpu{i}" for i in range(count)})
    assert set(reading.values) <= expected and reading.values
    assert all(math.isfinite(v) and v >= 0 for v in reading.values.values())
    if kind.timed:
        assert all(reading.samples[s] for s in reading.values)
