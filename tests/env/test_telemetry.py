"""Telemetry: fake vendor libraries replaying recorded sequences, a fake clock, faked and
real host trees. No test sleeps or times anything: the sampler is ticked by hand."""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import telemetry_recordings as rec

from accelbench.core.telemetry import MEM_USED_B, POWER_AVG_S, TEMP_C, UTIL_PCT
from accelbench.env.telemetry import (
    CPU_ENERGY_J,
    ENERGY_DISAGREEMENT,
    ENERGY_J,
    GFX_CLOCK_MHZ,
    LOAD1,
    POWER_W,
    SERIES_FORMAT,
    SOURCE_NAMES,
    THROTTLE,
    Energy,
    Series,
    TelemetrySampler,
    open_sources,
    summarize,
)
from accelbench.env.telemetry.amd import AmdSmiCliSource, AmdSmiSource, parse_metric
from accelbench.env.telemetry.host import HostSource
from accelbench.env.telemetry.nvidia import NvmlSource
from accelbench.env.telemetry.sources import DeviceAddress, vendor_index

# ---------------------------------------------------------------------------- fakes


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class AmdSmiException(Exception):
    pass


class FakeAmdSmi:
    """The calls AmdSmiSource makes, answering from recorded samples at index `i`."""

    AmdSmiException = AmdSmiException
    AmdSmiClkType = SimpleNamespace(GFX=0, MEM=2)
    AmdSmiTemperatureType = SimpleNamespace(EDGE=0, HOTSPOT=1, JUNCTION=1)
    AmdSmiTemperatureMetric = SimpleNamespace(CURRENT=0)
    AmdSmiMemoryType = SimpleNamespace(VRAM=0)

    def __init__(self, samples: list[dict[str, Any]], fail_from: int | None = None,
                 failure: Exception | None = None) -> None:
        self.samples, self.i = samples, 0
        self.fail_from, self.failure = fail_from, failure
        self.shut = False

    def _now(self) -> dict[str, Any]:
        if self.fail_from is not None and self.i >= self.fail_from:
            raise self.failure or AmdSmiException("AMDSMI_STATUS_DRM_ERROR")
        return self.samples[min(self.i, len(self.samples) - 1)]

    def amdsmi_init(self) -> None: ...
    def amdsmi_shut_down(self) -> None:
        self.shut = True

    def amdsmi_get_processor_handles(self) -> list[str]:
        return ["gpu0"]

    def amdsmi_get_power_info(self, h: str) -> dict[str, Any]:
        return dict(self._now()["power"])

    def amdsmi_get_energy_count(self, h: str) -> dict[str, Any]:
        return dict(self._now()["energy"])

    def amdsmi_get_clock_info(self, h: str, kind: int) -> dict[str, Any]:
        return dict(self._now()["gfx_clk" if kind == 0 else "mem_clk"])

    def amdsmi_get_temp_metric(self, h: str, sensor: int, metric: int) -> int:
        if sensor == 0:
            raise AmdSmiException("AMDSMI_STATUS_NOT_SUPPORTED")  # MI300X: no edge sensor
        return int(self._now()["hotspot_c"])

    def amdsmi_get_gpu_activity(self, h: str) -> dict[str, Any]:
        return dict(self._now()["activity"])

    def amdsmi_get_gpu_memory_usage(self, h: str, kind: int) -> int:
        return int(self._now()["vram_b"])

    def amdsmi_get_gpu_metrics_info(self, h: str) -> dict[str, Any]:
        self._now()
        return {"indep_throttle_status": "N/A", "throttle_status": "N/A"}  # MI300X

    def amdsmi_get_violation_status(self, h: str) -> dict[str, Any]:
        return dict(self._now()["violation"])


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_Unknown(NVMLError):
    pass


class FakeNvml:
    NVMLError = NVMLError
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, fail_from: int | None = None) -> None:
        self.i, self.fail_from = 0, fail_from
        self.energy = rec.h100_energy_mj()
        self.closed = False

    def _at(self, values: Sequence[int]) -> int:
        if self.fail_from is not None and self.i >= self.fail_from:
            raise NVMLError_Unknown("Unknown Error")
        return values[min(self.i, len(values) - 1)]

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None:
        self.closed = True

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        if index != 0:
            raise NVMLError("Invalid Argument")
        return "h100"

    def nvmlDeviceGetPowerUsage(self, h: str) -> int:
        return self._at(rec.H100_POWER_MW)

    def nvmlDeviceGetTotalEnergyConsumption(self, h: str) -> int:
        return self._at(self.energy)

    def nvmlDeviceGetClockInfo(self, h: str, kind: int) -> int:
        return self._at(rec.H100_SM_MHZ) if kind == 1 else self._at([2619])

    def nvmlDeviceGetTemperature(self, h: str, sensor: int) -> int:
        return 40 + self._at(range(11))

    def nvmlDeviceGetUtilizationRates(self, h: str) -> SimpleNamespace:
        return SimpleNamespace(gpu=self._at([0] + [100] * 9 + [0]), memory=40)

    def nvmlDeviceGetMemoryInfo(self, h: str) -> SimpleNamespace:
        raise NVMLError_NotSupported("Not Supported")  # one channel failing alone

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: str) -> int:
        return self._at(rec.H100_REASONS)


def importer_of(modules: dict[str, object]) -> Callable[[str], object]:
    def importer(name: str) -> object:
        if name not in modules:
            raise ModuleNotFoundError(f"No module named {name!r}")
        return modules[name]

    return importer


def drive(sampler: TelemetrySampler, clock: FakeClock, fakes: Sequence[Any],
          samples: int, window: tuple[int, int] = (2, 8)) -> Series:
    """Start at sample 0, tick through the rest, 0.1 s apart; mark samples `window`
    (2..8 unless told) timed."""
    sampler.start(background=False)
    for i in range(1, samples):
        clock.now += rec.INTERVAL_S
        for fake in fakes:
            fake.i = i
        if i == window[0]:
            began = clock.now
        if i == window[1]:
            sampler.mark_window(began, clock.now)
        if i < samples - 1:
            sampler.tick()
    return sampler.stop()  # the last sample is stop()'s own reading


def amd_series(samples: list[dict[str, Any]], **fake: Any) -> tuple[Series, FakeAmdSmi]:
    lib = FakeAmdSmi(samples, **fake)
    source = AmdSmiSource.open(0, importer=importer_of({"amdsmi": lib}))
    clock = FakeClock()
    return drive(TelemetrySampler([source], {}, rec.INTERVAL_S, clock=clock), clock, [lib],
                 len(samples)), lib


# ---------------------------------------------------------------------- AMD (amdsmi)


def test_amdsmi_replay_of_a_power_capped_mi300x() -> None:
    series, lib = amd_series(rec.mi300x_samples())
    assert series.sources == ("amdsmi",) and series.stopped is None and lib.shut
    assert series.channel(POWER_W) == tuple(rec.MI300X_POWER_W)
    assert series.channel(TEMP_C)[0] == 44.0  # hotspot: the edge sensor is not supported
    assert series.channel(MEM_USED_B)[1] == 291_504_128 + 25_769_803_776
    assert series.channel(THROTTLE)[5] == 1.0  # active_ppt_pwr is bit 0
    assert series.throttle_names[0] == "ppt_pwr"
    assert series.t == pytest.approx([i * 0.1 for i in range(11)])
    assert series.window == pytest.approx((0.2, 0.8))
    energy = summarize(series)
    assert energy.duration_s == pytest.approx(0.6)
    assert energy.energy_counter_j == pytest.approx(energy.energy_integral_j, rel=1e-5)
    assert energy.energy_j == energy.energy_counter_j and energy.counter_suspect is False
    assert energy.peak_power_w == 750.0
    assert energy.energy_integral_j is not None
    assert energy.mean_power_w == pytest.approx(energy.energy_integral_j / 0.6)
    assert (energy.clock_min_mhz, energy.clock_median_mhz) == (1650.0, 2100.0)
    assert energy.throttled
    assert energy.throttle_reasons[0] == "ppt_pwr"
    assert "21% below the window's peak of 2100 MHz" in energy.throttle_reasons[1]


def test_a_clock_sag_alone_counts_as_throttling() -> None:
    samples = rec.mi300x_samples()
    for sample in samples:
        violation = sample["violation"]
        assert isinstance(violation, dict)
        sample["violation"] = {key: "N/A" for key in violation}
    energy = summarize(amd_series(samples)[0])
    assert energy.throttled and len(energy.throttle_reasons) == 1
    assert "GFX clock fell to 1650 MHz" in energy.throttle_reasons[0]


def test_a_gfx_clock_held_for_heat_in_one_partition_is_a_slowdown() -> None:
    # gpu_metrics 1.8: the one GFX-clock flag N/A, arrays per partition and XCC instead;
    # XCC 5 of partition 0 held below the host's limit by heat in three readings.
    from accelbench.benchmarks.health.stress import slowdown_share

    samples = rec.mi300x_samples()
    for i, sample in enumerate(samples):
        violation = sample["violation"]
        assert isinstance(violation, dict)
        violation["active_gfx_clk_below_host_limit"] = "N/A"
        hot = [i in (4, 5, 6) and xcc == 5 for xcc in range(8)]
        for kind, row in (("pwr", [False] * 8), ("thm", hot), ("total", hot)):
            violation[f"active_gfx_clk_below_host_limit_{kind}"] = [
                row + ["N/A"] * 8, ["N/A"] * 16]
    series = amd_series(samples)[0]
    assert [int(v or 0) >> 7 & 1 for v in series.channel(THROTTLE)] == [
        0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0]
    assert series.throttle_names[7] == "gfx_clk_below_host_limit_thm"
    assert series.throttle_names[8] == "gfx_clk_below_host_limit_total"
    assert 6 not in series.throttle_names  # the power array: reported, never set
    assert slowdown_share(series) == pytest.approx(3 / 11)


def test_a_counter_30_percent_off_is_suspect_and_the_integral_is_used() -> None:
    series, _ = amd_series(rec.mi300x_samples(rec.mi300x_counter(scale=1.3)))
    energy = summarize(series)
    assert energy.disagreement == pytest.approx(0.3, rel=1e-4)
    assert energy.disagreement is not None
    assert energy.disagreement > ENERGY_DISAGREEMENT
    assert energy.counter_suspect is True
    assert energy.energy_j == energy.energy_integral_j
    assert any("disagrees with integrated power by 30%" in note for note in energy.notes)


# MI200 and later accumulate 64 bits; MI100 and the Navi parts 32: each wraps at its width.
@pytest.mark.parametrize("width", [2**64, 2**32], ids=["64-bit", "32-bit"])
def test_an_amdsmi_counter_wrapping_at_its_width_is_corrected(width) -> None:
    start = width - round(300.0 / (rec.MI300X_RESOLUTION_UJ * 1e-6))  # wraps after 300 J
    counter = rec.mi300x_counter(start_ticks=start, wrap_ticks=width)
    assert any(b < a for a, b in itertools.pairwise(counter))
    series, _ = amd_series(rec.mi300x_samples(counter))
    assert series.wrap_j[ENERGY_J] == pytest.approx(width * rec.MI300X_RESOLUTION_UJ * 1e-6)
    energy = summarize(series)
    assert energy.energy_counter_j == pytest.approx(energy.energy_integral_j, rel=1e-3)
    assert energy.counter_suspect is False
    assert any("wrapped 1 time" in note for note in energy.notes)


def test_a_counter_going_backwards_with_no_known_wrap_drops_that_pair() -> None:
    series = Series(interval_s=1.0, t=(0.0, 1.0, 2.0, 3.0),
                    channels={POWER_W: (100.0,) * 4, ENERGY_J: (5000.0, 5100.0, 40.0, 140.0)})
    energy = summarize(series)
    assert energy.energy_counter_j == pytest.approx(200.0)
    assert energy.energy_integral_j == pytest.approx(300.0)
    # The counter's power over the time it covers agrees with the sampled power: it is
    # trusted, and its energy is taken over the whole window.
    assert not energy.counter_suspect and energy.energy_j == pytest.approx(300.0)
    assert any("went backwards 1 time(s) with no known wrap" in n for n in energy.notes)


def test_a_missed_power_reading_does_not_make_a_sound_counter_suspect() -> None:
    t = tuple(0.1 * i for i in range(21))
    power = tuple(None if i == 10 else 300.0 for i in range(21))
    counter = tuple(1000.0 + 30.0 * i for i in range(21))
    energy = summarize(Series(interval_s=0.1, t=t, channels={POWER_W: power, ENERGY_J: counter}))
    assert not energy.counter_suspect and energy.energy_j == pytest.approx(600.0)


def test_amdsmi_raising_mid_case_ends_that_source_and_keeps_what_was_read() -> None:
    series, lib = amd_series(rec.mi300x_samples(), fail_from=6, failure=OSError("EIO"))
    assert series.stopped == "amdsmi raised OSError at 0.60 s: EIO"
    assert series.channel(POWER_W)[:6] == tuple(rec.MI300X_POWER_W[:6])
    assert set(series.channel(POWER_W)[6:]) == {None}
    assert lib.shut
    assert summarize(series).energy_counter_j is not None


# --------------------------------------------------------------------- NVIDIA (NVML)


def host_tree(tmp_path: Path) -> tuple[Path, Path]:
    procfs, sysfs = tmp_path / "proc", tmp_path / "sys"
    procfs.mkdir(parents=True)
    sysfs.mkdir(parents=True)
    (procfs / "loadavg").write_text("1.25 0.90 0.70 2/300 4242\n")
    (procfs / "stat").write_text("cpu  100 0 50 800 0 0 0 10 0 0\ncpu0 100 0 50 800 0 0 0 10\n")
    return procfs, sysfs


def test_nvml_replay_of_an_h100_with_a_power_cap_event(tmp_path: Path) -> None:
    procfs, sysfs = host_tree(tmp_path)
    nvml = FakeNvml()
    sources, missing = open_sources("cuda", 0, importer=importer_of({"pynvml": nvml}),
                                    sysfs=sysfs, procfs=procfs)
    assert [s.name for s in sources] == ["nvml", "host"]
    assert missing["amdsmi"] == "not needed: nvml answers for device 0"
    assert "rapl" in missing
    clock = FakeClock()
    series = drive(TelemetrySampler(sources, missing, 0.1, clock=clock), clock, [nvml], 11)
    assert series.sources == ("nvml", "host")
    assert series.channel(THROTTLE)[0] == 0.0  # GpuIdle is not a limit
    assert series.channel(THROTTLE)[4] == 4.0
    assert MEM_USED_B not in series.channels or set(series.channel(MEM_USED_B)) == {None}
    assert series.channel(POWER_W)[3] == pytest.approx(699.87)
    assert series.channel(LOAD1)[0] == 1.25
    energy = summarize(series)
    assert energy.throttle_reasons[0] == "SwPowerCap" and energy.throttled
    assert energy.energy_counter_j == pytest.approx(energy.energy_integral_j, rel=1e-4)
    assert energy.clock_min_mhz == 1755.0
    assert any(note.startswith("rapl not used:") for note in energy.notes)
    assert nvml.closed


def test_nvml_raising_mid_case_stops_it_and_the_host_goes_on(tmp_path: Path) -> None:
    procfs, sysfs = host_tree(tmp_path)
    nvml = FakeNvml(fail_from=5)
    source = NvmlSource.open(0, importer=importer_of({"pynvml": nvml}))
    host = HostSource(sysfs=sysfs, procfs=procfs)
    clock = FakeClock()
    series = drive(TelemetrySampler([source, host], {}, 0.1, clock=clock), clock, [nvml], 11)
    assert series.stopped == "nvml raised NVMLError_Unknown at 0.50 s: Unknown Error"
    assert series.channel(POWER_W)[4] is not None and series.channel(POWER_W)[5] is None
    assert all(v == 1.25 for v in series.channel(LOAD1))
    assert len(series.t) == 11 and nvml.closed


def test_missing_libraries_give_reasons_with_the_install_line(tmp_path: Path) -> None:
    procfs, sysfs = host_tree(tmp_path)
    sources, missing = open_sources("cuda", 0, importer=importer_of({}),
                                    runner=lambda argv, timeout: None,
                                    sysfs=sysfs, procfs=procfs)
    assert [s.name for s in sources] == ["host"]
    assert missing["nvml"] == "pynvml is not installed (pip install 'accelbench[telemetry]')"
    assert missing["amdsmi"] == "amdsmi is not installed (pip install 'accelbench[telemetry]')"
    assert missing["amd-smi"] == "amd-smi metric gave no reading for GPU 0"


def test_a_cpu_device_samples_the_host_only_and_choices_are_checked(tmp_path: Path) -> None:
    procfs, sysfs = host_tree(tmp_path)
    sources, missing = open_sources("cpu", None, sysfs=sysfs, procfs=procfs)
    assert [s.name for s in sources] == ["host"]
    assert missing["nvml"] == "not used for a 'cpu' device"
    assert open_sources("cuda", 0, include=(), sysfs=sysfs) == ([], {})
    with pytest.raises(ValueError, match="choose from amdsmi, amd-smi, nvml, host"):
        open_sources("cuda", 0, include=["rocm-smi"])
    assert SOURCE_NAMES == ("amdsmi", "amd-smi", "nvml", "host")


# ------------------------------------------------------------------------ amd-smi CLI


def test_the_amd_smi_cli_stands_in_when_the_library_is_absent(tmp_path: Path) -> None:
    procfs, sysfs = host_tree(tmp_path)
    calls: list[tuple[tuple[str, ...], float]] = []

    def runner(argv: Sequence[str], timeout: float) -> str:
        calls.append((tuple(argv), timeout))
        return rec.AMD_SMI_METRIC_JSON

    sources, missing = open_sources("cuda", 0, importer=importer_of({}), runner=runner,
                                    cli_timeout_s=3.0, sysfs=sysfs, procfs=procfs)
    assert [s.name for s in sources] == ["amd-smi", "host"]
    assert "amd-smi" not in missing and "not installed" in missing["amdsmi"]
    assert calls[0] == (("amd-smi", "metric", "--json", "-g", "0"), 3.0)
    reading = sources[0].read()
    assert reading[POWER_W] == 702.0 and reading[ENERGY_J] == 14_973_202.411
    assert (reading[GFX_CLOCK_MHZ], reading[TEMP_C], reading[UTIL_PCT]) == (2093.0, 71.0, 100)
    assert reading[MEM_USED_B] == 24_866 * 1024**2 and reading[THROTTLE] == 0.0
    assert parse_metric("garbage", 0)[POWER_W] is None


def test_an_amd_smi_timeout_is_a_reason_at_open_and_ends_the_source_mid_case() -> None:
    def hangs(argv: Sequence[str], timeout: float) -> str:
        raise TimeoutError(f"amd-smi metric did not answer within {timeout:g} s")

    _, missing = open_sources("cuda", 0, include=["amd-smi"], runner=hangs, cli_timeout_s=2)
    assert missing == {"amd-smi": "amd-smi metric did not answer within 2 s"}
    answers = iter([rec.AMD_SMI_METRIC_JSON] * 2)

    def then_hangs(argv: Sequence[str], timeout: float) -> str:
        return next(answers, None) or hangs(argv, timeout)

    source = AmdSmiCliSource.open(0, runner=then_hangs, timeout_s=2.0)
    clock = FakeClock()
    sampler = TelemetrySampler([source], {}, 1.0, clock=clock).start(background=False)
    clock.now += 1.0
    series = sampler.stop()
    assert series.stopped == "amd-smi raised TimeoutError at 1.00 s: amd-smi metric did not " \
                             "answer within 2 s"
    assert series.channel(POWER_W) == (702.0, None)
    assert ENERGY_J not in series.wrap_j  # the CLI's total carries no known wrap


# ------------------------------------------------------------------------------ host


def test_the_real_host_gives_load_and_rapl_or_the_reason_it_cannot() -> None:
    host = HostSource()
    host.read()
    reading = host.read()
    assert reading[LOAD1] is not None
    if reading[CPU_ENERGY_J] is None:
        assert host.missing["rapl"]
    else:
        assert "rapl" not in host.missing


def write_rapl(sysfs: Path, package: int, energy_uj: int, max_uj: int | None) -> None:
    domain = sysfs / "class" / "powercap" / f"intel-rapl:{package}"
    domain.mkdir(parents=True, exist_ok=True)
    (domain / "name").write_text(f"package-{package}\n")
    (domain / "energy_uj").write_text(f"{energy_uj}\n")
    if max_uj is not None:
        (domain / "max_energy_range_uj").write_text(f"{max_uj}\n")
    sub = sysfs / "class" / "powercap" / f"intel-rapl:{package}:0"
    sub.mkdir(exist_ok=True)  # a core sub-domain: not a package, never summed
    (sub / "energy_uj").write_text("1\n")


RAPL_MAX_UJ = 262_143_328_850


@pytest.mark.parametrize("packages", [1, 2])
def test_rapl_from_a_fake_sysfs_tree_through_a_wrap(tmp_path: Path, packages: int) -> None:
    procfs, sysfs = host_tree(tmp_path)
    # 60 W per package, sampled every 0.5 s: 30 J (3e7 µJ) a step; wraps after step 2.
    readings = [RAPL_MAX_UJ - 70_000_000 + k * 30_000_000 for k in range(6)]
    readings = [r % RAPL_MAX_UJ for r in readings]
    for p in range(packages):
        write_rapl(sysfs, p, readings[0], RAPL_MAX_UJ)
    host = HostSource(sysfs=sysfs, procfs=procfs)
    assert host.missing == {}
    clock = FakeClock()
    sampler = TelemetrySampler([host], {}, 0.5, clock=clock).start(background=False)
    for value in readings[1:]:
        clock.now += 0.5
        for p in range(packages):
            write_rapl(sysfs, p, value, RAPL_MAX_UJ)
        sampler.tick()
    series = sampler.stop()
    assert "rapl" in series.sources
    if packages == 1:
        assert series.wrap_j == {CPU_ENERGY_J: pytest.approx(RAPL_MAX_UJ * 1e-6)}
    energy = summarize(series)
    assert energy.cpu_energy_j == pytest.approx(packages * 5 * 30.0)
    assert energy.cpu_mean_power_w == pytest.approx(packages * 60.0)
    assert energy.energy_j is None and energy.throttled is None  # no device in the series


def test_rapl_readable_by_root_only_is_a_reason(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    sysfs = tmp_path / "sys"
    write_rapl(sysfs, 0, 5, RAPL_MAX_UJ)
    read_text = Path.read_text

    def denied(self: Path, *args: Any, **kwargs: Any) -> str:
        if self.name == "energy_uj":  # what a non-root user meets since Linux 5.10
            raise PermissionError(13, "Permission denied", str(self))
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", denied)
    host = HostSource(sysfs=sysfs, procfs=tmp_path)
    assert "root only" in host.missing["rapl"]
    assert host.read()[CPU_ENERGY_J] is None


# ---------------------------------------------------------------------------- sampler


@pytest.mark.parametrize("interval", [0, -1.0, float("nan"), float("inf")])
def test_the_interval_must_be_positive_and_finite(interval: float) -> None:
    with pytest.raises(ValueError, match="interval_s"):
        TelemetrySampler([], {}, interval)


def test_the_background_thread_ticks_through_the_sleep_seam() -> None:
    clock, enough = FakeClock(), threading.Event()
    lib = FakeAmdSmi(rec.mi300x_samples())
    source = AmdSmiSource.open(0, importer=importer_of({"amdsmi": lib}))

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        if len(clock.slept) >= 3:
            enough.set()

    sampler = TelemetrySampler([source], {"nvml": "not installed"}, 0.1, clock=clock,
                               sleep=sleep).start()
    assert enough.wait(10.0)
    series = sampler.stop()
    assert len(series.t) >= 4 and series.stopped is None
    assert series.missing == {"nvml": "not installed"}
    assert sampler.stop() is series


# ------------------------------------------------------------------------ the records


def test_series_round_trips_and_malformed_or_newer_dicts_are_refused() -> None:
    series, _ = amd_series(rec.mi300x_samples())
    stored = json.loads(json.dumps(series.to_dict()))
    assert stored["format_version"] == SERIES_FORMAT
    assert "cpu_freq_mhz" not in stored["channels"]
    again = Series.from_dict(stored)
    assert again.channel(POWER_W) == series.channel(POWER_W)
    assert again.throttle_names == series.throttle_names
    assert again.window == pytest.approx(series.window)
    # Rounded on the way out, so the figures agree to the stored precision.
    assert summarize(again).energy_j == pytest.approx(summarize(series).energy_j, rel=1e-6)
    assert summarize(again).throttle_reasons == summarize(series).throttle_reasons
    with pytest.raises(ValueError, match="newer"):
        Series.from_dict({**stored, "format_version": SERIES_FORMAT + 1})
    with pytest.raises(ValueError, match="values for"):
        Series.from_dict({**stored, "t": stored["t"][:-1]})
    with pytest.raises(TypeError):
        Series.from_dict({**stored, "channels": {POWER_W: ["hot"] * len(stored["t"])}})
    with pytest.raises(TypeError):
        Series.from_dict([stored])
    with pytest.raises(ValueError):
        Series.from_dict({**stored, "interval_s": 0})
    with pytest.raises(ValueError):
        Series.from_dict({**stored, "throttle_names": {"x": "y"}})
    energy = summarize(series)
    assert Energy.from_dict(json.loads(json.dumps(energy.to_dict()))) == energy
    older = {k: v for k, v in energy.to_dict().items()
             if k not in ("package_devices", "package_power_w", "tolerance")}
    assert Energy.from_dict(older) == dataclasses.replace(energy, tolerance=None)
    with pytest.raises(TypeError):
        Energy.from_dict({**energy.to_dict(), "energy_j": "lots"})


def test_summarize_over_the_window_and_over_the_whole_series() -> None:
    series, _ = amd_series(rec.mi300x_samples())
    timed = summarize(series)
    whole = summarize(Series(**{**series.__dict__, "window": None}))
    assert whole.duration_s == pytest.approx(1.0) and timed.duration_s == pytest.approx(0.6)
    assert whole.peak_power_w == timed.peak_power_w == 750.0
    assert whole.energy_j is not None and timed.energy_j is not None
    assert whole.mean_power_w is not None and timed.mean_power_w is not None
    assert whole.energy_j > timed.energy_j
    assert whole.mean_power_w < timed.mean_power_w
    assert whole.clock_min_mhz == 132.0 and timed.clock_min_mhz == 1650.0


# ------------------------------------------------------------ NVML: instant power


class FakeNvmlStep(FakeNvml):
    """An H100 through a power step: the instant power field answers (unless `instant` is
    False, as before driver 530), while nvmlDeviceGetPowerUsage lags by its 1 s average."""

    def __init__(self, instant: bool = True, arch: int | None = 9,
                 name: str = "NVIDIA H100 80GB HBM3") -> None:
        super().__init__()
        self.instant, self.arch, self.name = instant, arch, name
        self.energy = rec.h100_step_energy_mj()
        self.average = rec.h100_step_average_mw()

    def nvmlDeviceGetFieldValues(self, h: str, fields: list[int]) -> list[SimpleNamespace]:
        assert fields == [186]  # NVML_FI_DEV_POWER_INSTANT
        if not self.instant:  # NVML sets NOT_SUPPORTED in the value, it does not raise
            return [SimpleNamespace(fieldId=186, scopeId=0, nvmlReturn=3, valueType=0,
                                    value=SimpleNamespace(dVal=0.0))]
        return [SimpleNamespace(fieldId=186, scopeId=0, nvmlReturn=0, valueType=1,
                                value=SimpleNamespace(uiVal=self._at(rec.H100_STEP_TRUE_MW)))]

    def nvmlDeviceGetPowerUsage(self, h: str) -> int:
        return self._at(self.average)

    def nvmlDeviceGetArchitecture(self, h: str) -> int:
        if self.arch is None:
            raise NVMLError_NotSupported("Not Supported")
        return self.arch

    def nvmlDeviceGetName(self, h: str) -> str:
        return self.name


def nvml_step_series(nvml: FakeNvml) -> Series:
    """The step sampled every 0.1 s, timed from the step (0.5 s) to 2.5 s."""
    source = NvmlSource.open(0, importer=importer_of({"pynvml": nvml}))
    clock = FakeClock()
    return drive(TelemetrySampler([source], {}, rec.INTERVAL_S, clock=clock), clock, [nvml],
                 len(rec.H100_STEP_TRUE_MW), window=(5, 25))


def test_nvml_instant_power_keeps_a_sound_counter_trusted_after_a_power_step() -> None:
    series = nvml_step_series(FakeNvmlStep())
    assert series.channel(POWER_W)[5] == 700.0  # the step, at once
    assert set(series.channel(POWER_AVG_S)) == {0.0}
    energy = summarize(series)
    assert energy.power_averaging_s == 0.0
    assert energy.disagreement is not None and energy.disagreement < 0.01
    assert energy.counter_suspect is False and energy.energy_j == energy.energy_counter_j


def test_without_the_instant_field_the_averaged_power_is_recorded_and_allowed_for() -> None:
    series = nvml_step_series(FakeNvmlStep(instant=False))
    assert series.channel(POWER_W)[5] == 133.0  # a 1 s average, still mostly idle
    assert set(series.channel(POWER_AVG_S)) == {1.0}
    energy = summarize(series)
    # The integral of the ramping average is 20-30% short of the counter over this 2 s
    # window, all of it the average's lag: the counter is used, not called suspect.
    assert energy.disagreement is not None and energy.disagreement > ENERGY_DISAGREEMENT
    assert energy.counter_suspect is None and energy.energy_j == energy.energy_counter_j
    assert energy.power_averaging_s == 1.0
    assert any("averaged over 1 s, too long for a 2 s window" in n for n in energy.notes)


@pytest.mark.parametrize(("arch", "name", "averaging"), [
    (5, "Tesla V100-SXM2-32GB", 0.0),  # before Ampere: instantaneous
    (7, "NVIDIA A100-SXM4-80GB", 0.0),  # GA100: instantaneous
    (7, "NVIDIA A40", 1.0),  # other Ampere: 1 s average
    (9, "NVIDIA H100 80GB HBM3", 1.0),
    (None, "NVIDIA H100 80GB HBM3", 1.0),  # architecture unknown: the longer window
])
def test_the_averaging_of_power_usage_follows_the_architecture(arch: int | None, name: str,
                                                               averaging: float) -> None:
    series = nvml_step_series(FakeNvmlStep(instant=False, arch=arch, name=name))
    assert set(series.channel(POWER_AVG_S)) == {averaging}


class FakeNvmlMig(FakeNvml):
    """An H100 in MIG mode with two instances."""

    def nvmlDeviceGetMigMode(self, h: str) -> list[int]:
        return [1, 1]

    def nvmlDeviceGetMaxMigDeviceCount(self, h: str) -> int:
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: str, i: int) -> str:
        if i >= 2:
            raise NVMLError("Not Found")
        return f"mig{i}"

    def nvmlDeviceGetUUID(self, h: str) -> str:
        return {"mig0": "MIG-5a1c", "mig1": "MIG-77e0"}[h]


def test_a_gpu_in_mig_mode_is_read_as_the_gpu_and_shared_by_its_instances() -> None:
    series = drive_nvml(FakeNvmlMig())
    assert series.shared_by == {POWER_W: ("MIG-5a1c", "MIG-77e0"),
                                ENERGY_J: ("MIG-5a1c", "MIG-77e0")}
    energy = summarize(series)
    assert energy.mean_power_w is None and energy.energy_j is None
    assert energy.package_power_w is not None and energy.package_power_w > 600
    assert energy.package_devices == ("MIG-5a1c", "MIG-77e0")
    assert drive_nvml(FakeNvml()).shared_by == {}


def drive_nvml(nvml: FakeNvml) -> Series:
    source = NvmlSource.open(0, importer=importer_of({"pynvml": nvml}))
    clock = FakeClock()
    return drive(TelemetrySampler([source], {}, rec.INTERVAL_S, clock=clock), clock, [nvml], 11)


# ------------------------------------------------------------- AMD: packages, widths


class FakeMi250x(FakeAmdSmi):
    """amdsmi on one MI250X: two GCDs, the package's power and energy on the first."""

    def __init__(self, serial: bool = True) -> None:
        self.gcds = [rec.mi250x_gcd_samples(0), rec.mi250x_gcd_samples(1)]
        super().__init__(self.gcds[0])
        self.serial = serial

    def _of(self, h: str) -> dict[str, Any]:
        self._now()
        return self.gcds[int(h[-1])][min(self.i, len(self.gcds[0]) - 1)]

    def amdsmi_get_processor_handles(self) -> list[str]:
        return ["gcd0", "gcd1"]

    def amdsmi_get_gpu_device_bdf(self, h: str) -> str:
        return rec.MI250X_BDF[int(h[-1])]

    def amdsmi_get_gpu_asic_info(self, h: str) -> dict[str, Any]:
        return dict(rec.MI250X_ASIC)

    def amdsmi_get_gpu_board_info(self, h: str) -> dict[str, Any]:
        return {"model_number": "102-D65209-00", "product_name": "Instinct MI250X",
                "product_serial": rec.MI250X_SERIAL if self.serial else "N/A",
                "manufacturer_name": "AMD"}

    def amdsmi_get_power_info(self, h: str) -> dict[str, Any]:
        return dict(self._of(h)["power"])

    def amdsmi_get_energy_count(self, h: str) -> dict[str, Any]:
        return dict(self._of(h)["energy"])

    def amdsmi_get_temp_metric(self, h: str, sensor: int, metric: int) -> int:
        return int(self._of(h)["hotspot_c"])


def mi250x_series(index: int, **fake: Any) -> Series:
    lib = FakeMi250x(**fake)
    source = AmdSmiSource.open(index, importer=importer_of({"amdsmi": lib}))
    clock = FakeClock()
    return drive(TelemetrySampler([source], {}, rec.INTERVAL_S, clock=clock), clock, [lib],
                 len(rec.MI250X_POWER_W))


@pytest.mark.parametrize("gcd", [0, 1])
def test_each_mi250x_gcd_reads_the_package_power_as_the_packages(gcd: int) -> None:
    series = mi250x_series(gcd)
    assert series.shared_by == {POWER_W: rec.MI250X_BDF, ENERGY_J: rec.MI250X_BDF}
    # The secondary GCD reads 0 W itself: the package's power is read on the primary.
    assert series.channel(POWER_W) == tuple(rec.MI250X_POWER_W)
    assert series.channel(TEMP_C)[0] == 40.0 + gcd  # the device's own channels stay its own
    assert set(series.channel(POWER_AVG_S)) == {1.0}  # MI200: average socket power
    energy = summarize(series)
    assert energy.mean_power_w is None and energy.peak_power_w is None
    assert energy.energy_j is None  # nothing credited to the GCD alone
    assert energy.package_power_w is not None and 510 < energy.package_power_w < 520
    assert energy.package_energy_j == pytest.approx(energy.package_power_w * 0.6, rel=0.01)
    assert energy.package_devices == rec.MI250X_BDF
    assert any("the package that 0000:c1:00.0, 0000:c6:00.0 share" in n for n in energy.notes)


def test_a_gcd_whose_partner_is_not_found_is_still_read_as_its_packages() -> None:
    alone = ("0000:c6:00.0", "the other GCD of its package (not found)")
    secondary = mi250x_series(1, serial=False)
    assert secondary.shared_by[POWER_W] == alone
    # Its own 0 W and 0 J are not the package's, and no primary is known: nothing read.
    assert set(secondary.channel(POWER_W)) == {None}
    assert set(secondary.channel(ENERGY_J)) == {None}
    primary = mi250x_series(0, serial=False)
    assert primary.shared_by[POWER_W][0] == "0000:c1:00.0"
    assert primary.channel(POWER_W) == tuple(rec.MI250X_POWER_W)
    assert summarize(primary).mean_power_w is None


# --------------------------------------------------------- which device is which


class FakeNvmlNode(FakeNvml):
    """Four GPUs, as NVML numbers them (by PCI bus)."""

    BUSES = (0x18, 0x2A, 0x3A, 0x5D)
    UUIDS = ("GPU-1f0e", "GPU-8a3c4d2e", "GPU-77aa", "GPU-c0de")

    def nvmlDeviceGetCount(self) -> int:
        return len(self.BUSES)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"gpu{index}"

    def nvmlDeviceGetPciInfo(self, h: str) -> SimpleNamespace:
        bus = self.BUSES[int(h[-1])]
        return SimpleNamespace(domain=0, bus=bus, device=0, busId=f"00000000:{bus:02X}:00.0")

    def nvmlDeviceGetUUID(self, h: str) -> str:
        return self.UUIDS[int(h[-1])]


def at_bus(bus: int) -> DeviceAddress:
    return DeviceAddress(pci=(0, bus, 0))


@pytest.mark.parametrize(("env", "torch_index", "address", "expected"), [
    # A UUID in CUDA_VISIBLE_DEVICES: nothing to count, the address finds NVML's GPU 2.
    ({"CUDA_VISIBLE_DEVICES": "GPU-77aa"}, 0, at_bus(0x3A), 2),
    # CUDA's default fastest-first order put GPU 3 first: the count would say 1.
    ({"CUDA_VISIBLE_DEVICES": "1,3"}, 0, at_bus(0x5D), 3),
    # A MIG instance: PyTorch gives its GPU's address; the GPU is read.
    ({"CUDA_VISIBLE_DEVICES": "MIG-5a1c"}, 0, DeviceAddress((0, 0x2A, 0), "5a1c"), 1),
    # No address, but the UUID PyTorch prints (without "GPU-").
    ({}, 0, DeviceAddress(None, "8a3c4d2e"), 1),
])
def test_nvml_finds_the_torch_device_by_address_not_by_counting(
        env: dict[str, str], torch_index: int, address: DeviceAddress, expected: int) -> None:
    importer = importer_of({"pynvml": FakeNvmlNode()})
    assert vendor_index(torch_index, env, vendor="nvidia", address=address,
                        importer=importer) == expected


def test_each_vendor_counts_only_its_own_visible_devices() -> None:
    none = importer_of({})  # no library: only the count is left
    hip = {"HIP_VISIBLE_DEVICES": "2", "ROCR_VISIBLE_DEVICES": "1,2,3"}
    assert vendor_index(0, hip, vendor="nvidia", address=DeviceAddress(), importer=none) == 0
    assert vendor_index(0, hip, vendor="amd", address=DeviceAddress(), importer=none) == 3
    cuda = {"CUDA_VISIBLE_DEVICES": "4,5"}  # HIP reads it too, where HIP's own is unset
    assert vendor_index(1, cuda, vendor="amd", address=DeviceAddress(), importer=none) == 5
    assert vendor_index(1, cuda, vendor="nvidia", address=DeviceAddress(), importer=none) == 5
    # An address the library does not know leaves the count too.
    nvml = importer_of({"pynvml": FakeNvmlNode()})
    assert vendor_index(1, cuda, vendor="nvidia", address=at_bus(0x99), importer=nvml) == 5


class FakeAmdSmiNode(FakeAmdSmi):
    def __init__(self, bdfs: Sequence[str]) -> None:
        super().__init__(rec.mi300x_samples())
        self.bdfs = list(bdfs)

    def amdsmi_get_processor_handles(self) -> list[str]:
        return [f"gpu{i}" for i in range(len(self.bdfs))]

    def amdsmi_get_gpu_device_bdf(self, h: str) -> str:
        return self.bdfs[int(h[3:])]


def test_amdsmi_finds_the_torch_device_by_its_pci_address() -> None:
    node = importer_of({"amdsmi": FakeAmdSmiNode(
        ["0000:c1:00.0", "0000:c6:00.0", "0000:c9:00.0", "0000:ce:00.0"])})
    uuids = {"ROCR_VISIBLE_DEVICES": "GPU-4c6a1b2c3d4e5f60"}
    assert vendor_index(0, uuids, vendor="amd", address=at_bus(0xC9), importer=node) == 2
    # Eight CPX partitions on one PCI device: the address cannot choose, the count does.
    cpx = importer_of({"amdsmi": FakeAmdSmiNode(["0000:0c:00.0"] * 8)})
    assert vendor_index(0, {"HIP_VISIBLE_DEVICES": "5"}, vendor="amd",
                        address=at_bus(0x0C), importer=cpx) == 5


def test_the_address_is_read_from_torch_device_properties() -> None:
    props = SimpleNamespace(name="NVIDIA H100 80GB HBM3", pci_domain_id=0, pci_bus_id=0x3A,
                            pci_device_id=0, uuid="77aa")
    assert DeviceAddress.of(props) == DeviceAddress((0, 0x3A, 0), "77aa")
    assert DeviceAddress.of(SimpleNamespace(name="old torch")) == DeviceAddress()
