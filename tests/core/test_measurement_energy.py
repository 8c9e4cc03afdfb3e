"""Energy figures and the throttled flag are derived from a record's telemetry, raw first:
the record keeps the time series, the figures follow from it when read."""

from __future__ import annotations

import dataclasses
import json

import pytest

from accelbench.core.case import Case
from accelbench.core.measurement import Measurement, Rate, merge_processes
from accelbench.core.telemetry import GFX_CLOCK_MHZ, POWER_W, THROTTLE, Series
from accelbench.core.timing import Timing

CASE = Case.make("gemm", "v", "micro", {"shape": 8192, "dtype": "bf16"}, "cuda:0")
FLOP = 2 * 8192**3


def _series(power: float, clock: tuple[float, ...] = (2100.0,) * 6,
            throttle: tuple[int, ...] = (0,) * 6) -> Series:
    """Six readings 0.05 s apart, the timed part from 0.05 s to 0.2 s."""
    t = tuple(0.05 * i for i in range(6))
    return Series(interval_s=0.05, t=t,
                  channels={POWER_W: (100.0, power, power, power, power, 100.0),
                            GFX_CLOCK_MHZ: clock, THROTTLE: throttle},
                  sources=("nvml",), throttle_names={2: "HW slowdown"}, window=(0.05, 0.2))


def _measurement(*series: Series, per_call: float = 1.5e-3) -> Measurement:
    timings = tuple(Timing((per_call,) * 9, 10, 0, "converged") for _ in series)
    return Measurement(CASE, "ok", timings=timings, rates=(Rate("throughput", FLOP, "FLOP/s"),),
                       telemetry=tuple(s.to_dict() for s in series))


def _value(m: Measurement, name: str) -> float:
    figure = m.figure(name)
    assert figure is not None, name
    return figure.value


def test_power_energy_per_call_and_work_per_joule_follow_from_the_series() -> None:
    m = _measurement(_series(600.0))
    figures = {f.name: f for f in m.figures}
    assert figures["power"].value == pytest.approx(600.0) and figures["power"].unit == "W"
    assert figures["energy_per_call"].value == pytest.approx(600.0 * 1.5e-3)
    per_joule = figures["throughput_per_joule"]
    assert per_joule.unit == "FLOP/J" and per_joule.higher_is_better
    assert per_joule.value == pytest.approx(FLOP / (600.0 * 1.5e-3))
    assert m.primary is not None and m.primary.name == "throughput"  # the headline stays
    assert not m.throttled


def test_a_throttle_bit_or_a_clock_sag_in_the_timed_part_marks_the_case() -> None:
    bit = _measurement(_series(600.0, throttle=(0, 0, 4, 4, 0, 0)))
    assert bit.throttled and bit.throttle_reasons == ("HW slowdown",)
    sag = _measurement(_series(600.0, clock=(2100.0, 2100.0, 1500.0, 1600.0, 2100.0, 2100.0)))
    assert sag.throttled and "GFX clock fell to 1500 MHz" in sag.throttle_reasons[0]
    dip = _measurement(_series(600.0, clock=(2100.0, 1200.0, 2100.0, 2100.0, 2100.0, 2100.0)))
    assert not dip.throttled  # one low reading: the clock ramping up, not throttling
    outside = _measurement(_series(600.0, throttle=(4, 0, 0, 0, 0, 4)))
    assert not outside.throttled  # before and after the timed part does not count


def test_processes_combine_and_the_record_round_trips() -> None:
    parts = [_measurement(_series(p)) for p in (500.0, 600.0, 700.0)]
    merged = merge_processes(parts)
    assert len(merged.telemetry) == 3 and _value(merged, "power") == pytest.approx(600.0)
    record = json.loads(json.dumps(merged.to_dict()))
    assert record["format_version"] == 3 and len(record["telemetry"]) == 3
    again = Measurement.from_dict(record)
    assert again == merged and _value(again, "power") == pytest.approx(600.0)
    exported = merged.export_dict()
    assert exported["energy"]["mean_power_w"] == pytest.approx(600.0)
    assert exported["throttled"] is False


def test_a_cpu_case_takes_the_package_power_and_no_telemetry_adds_no_figure() -> None:
    from accelbench.core.telemetry import CPU_ENERGY_J

    cpu = Case.make("gemm", "v", "micro", {"shape": 1024, "dtype": "fp32"}, "cpu")
    series = Series(interval_s=0.1, t=(0.0, 0.1, 0.2), channels={CPU_ENERGY_J: (0.0, 6.0, 12.0)},
                    sources=("host",))
    m = Measurement(cpu, "ok", timings=(Timing((1e-2,) * 5, 1, 0, "converged"),),
                    rates=(Rate("throughput", 2 * 1024**3, "FLOP/s"),),
                    telemetry=(series.to_dict(),))
    assert _value(m, "power") == pytest.approx(60.0)
    bare = Measurement(cpu, "ok", timings=m.timings, rates=m.rates)
    assert bare.energy is None and bare.figure("power") is None


def test_a_stored_series_that_cannot_be_read_leaves_the_measurement_readable() -> None:
    good = _series(600.0).to_dict()
    newer = {**good, "format_version": 99}
    m = _measurement(_series(600.0), _series(600.0))
    m = Measurement(m.case, m.status, timings=m.timings, rates=m.rates,
                    telemetry=(good, newer))
    assert len(m.series) == 1 and "process 2 left out" in m.telemetry_problems[0]
    assert _value(m, "power") == pytest.approx(600.0)
    assert m.energy is not None
    assert any("left out" in note for note in m.energy.notes)


def test_work_per_joule_of_a_rate_over_the_mean_uses_the_mean_time() -> None:
    series = _series(400.0)
    timing = Timing((1.0, 1.0, 1.0, 4.0), 1, 0, "converged")  # median 1 s, mean 1.75 s
    m = Measurement(CASE, "ok", timings=(timing,),
                    rates=(Rate("throughput", 64.0, "sample/s", over="mean"),),
                    telemetry=(series.to_dict(),))
    assert _value(m, "energy_per_call") == pytest.approx(400.0 * 1.75)
    assert _value(m, "throughput_per_joule") == pytest.approx(64.0 / (400.0 * 1.75))
    assert _value(m, "throughput_per_joule") == pytest.approx(
        _value(m, "throughput") / _value(m, "power"))


def test_a_case_on_several_ranks_gets_the_power_of_its_device_only() -> None:
    case = Case.make("train-ddp", "v", "model",
                     {"model": "bert", "world_size": 2, "backend": "nccl"}, "cuda:0")
    m = Measurement(case, "ok", timings=(Timing((1.0,) * 5, 1, 0, "converged"),),
                    rates=(Rate("throughput", 64.0, "sample/s", over="mean"),),
                    telemetry=(_series(400.0).to_dict(),))
    assert m.figure("power") is not None
    assert m.figure("throughput_per_joule") is None and m.figure("energy_per_call") is None


def test_a_64_bit_throttle_mask_keeps_every_bit_through_the_record() -> None:
    from accelbench.core.telemetry import THROTTLE

    mask = 2**57 + 1
    series = Series(interval_s=0.1, t=(0.0, 0.1), channels={THROTTLE: (mask, mask)})
    again = Series.from_dict(json.loads(json.dumps(series.to_dict())))
    assert again.channel(THROTTLE) == (mask, mask)


def test_a_copied_context_still_marks_the_timed_part() -> None:
    import dataclasses

    from accelbench.core.context import CaseContext
    from accelbench.core.device import DeviceInfo
    from accelbench.core.timing import PerfCounterClock, TimingPolicy

    marks: list[tuple[float, float]] = []
    ctx = CaseContext(DeviceInfo("cpu", None, "cpu", "test"), PerfCounterClock(),
                      TimingPolicy(warmup_time=0.001, max_time=0.01, min_samples=2),
                      on_timed=lambda a, b: marks.append((a, b)))
    copy = dataclasses.replace(ctx, flush=None)  # as collectives do with their own clock
    copy.time(lambda: None)
    assert len(marks) == 1 and marks[0][0] <= marks[0][1]


def _step_series(seconds: float, window: tuple[float, float], counter_scale: float = 1.0,
                 averaging: float | None = 1.0) -> Series:
    """A load stepping from 100 W to 700 W at 1 s, read every 0.1 s as a 1 s average (as
    nvmlDeviceGetPowerUsage on Hopper, MI200's average socket power), with an energy
    counter that integrates the true power (times `counter_scale`)."""
    from accelbench.core.telemetry import ENERGY_J, POWER_AVG_S

    t = tuple(round(0.1 * i, 1) for i in range(round(seconds * 10) + 1))
    averaged = tuple(100.0 + 600.0 * min(max(x - 1.0, 0.0), 1.0) for x in t)
    counter = tuple(counter_scale * (100.0 * x if x < 1 else 100.0 + 700.0 * (x - 1.0))
                    for x in t)
    channels = {POWER_W: averaged, ENERGY_J: counter}
    if averaging is not None:
        channels[POWER_AVG_S] = (averaging,) * len(t)
    return Series(interval_s=0.1, t=t, channels=channels, sources=("nvml",), window=window)


def test_a_sound_counter_is_not_suspect_for_the_lag_of_averaged_power() -> None:
    from accelbench.core.energy import ENERGY_DISAGREEMENT, summarize

    energy = summarize(_step_series(5.0, (1.0, 4.0)))
    # The averaged power ramps for a second after the step: its integral is 1800 J where
    # 2100 J were drawn, 17% apart, all of it lag.
    assert energy.disagreement == pytest.approx(1 / 6, rel=1e-3)
    assert energy.disagreement is not None and energy.disagreement > ENERGY_DISAGREEMENT
    assert energy.counter_suspect is False and energy.energy_j == pytest.approx(2100.0)
    assert energy.power_averaging_s == 1.0
    assert energy.tolerance is not None and energy.tolerance > energy.disagreement
    assert any("power read as a 1 s average" in n for n in energy.notes)


def test_a_wrong_counter_is_still_suspect_beside_averaged_power() -> None:
    from accelbench.core.energy import summarize

    short = summarize(_step_series(5.0, (1.0, 4.0), counter_scale=1.3))
    assert short.counter_suspect is True and short.energy_j == short.energy_integral_j
    long = summarize(_step_series(20.0, (1.0, 20.0), counter_scale=1.3))
    assert long.tolerance is not None and long.tolerance < 0.2  # the lag is small here
    assert long.counter_suspect is True


def test_instantaneous_power_keeps_the_plain_tolerance() -> None:
    from accelbench.core.energy import ENERGY_DISAGREEMENT, summarize

    energy = summarize(_step_series(5.0, (1.0, 4.0), averaging=0.0))
    assert energy.tolerance == ENERGY_DISAGREEMENT and energy.counter_suspect is True
    old = summarize(_step_series(5.0, (1.0, 4.0), averaging=None))  # a format-1 series
    assert old.tolerance == ENERGY_DISAGREEMENT and old.power_averaging_s is None


def _package_series(power: float) -> Series:
    gcds = ("0000:c1:00.0", "0000:c6:00.0")
    return dataclasses.replace(_series(power), shared_by={POWER_W: gcds})


def test_a_package_shared_by_two_ranks_is_counted_once_and_credited_to_neither() -> None:
    case = Case.make("train-ddp", "v", "model",
                     {"model": "bert", "world_size": 2, "backend": "nccl"}, "cuda:0")
    parts = [Measurement(case, "ok", timings=(Timing((1.0,) * 5, 1, 0, "converged"),),
                         rates=(Rate("throughput", 64.0, "sample/s"),),
                         telemetry=(_package_series(520.0).to_dict(),)) for _ in range(2)]
    merged = merge_processes(parts)
    energy = merged.energy
    assert energy is not None and len(merged.series) == 2
    assert energy.package_power_w == pytest.approx(520.0)  # the package once, not twice
    assert energy.package_devices == ("0000:c1:00.0", "0000:c6:00.0")
    assert energy.mean_power_w is None and energy.energy_j is None
    assert merged.figure("power") is None and merged.figure("energy_per_call") is None


def test_a_single_gcd_case_gets_no_per_device_figure_from_its_package() -> None:
    from accelbench.report.energy import counter_cell, energy_table

    m = _measurement(_package_series(520.0))
    assert m.figure("power") is None and m.figure("throughput_per_joule") is None
    table = energy_table([m])
    assert table is not None and table.rows[0][1] == "520 W (package)"
    again = Measurement.from_dict(json.loads(json.dumps(m.to_dict())))
    assert again.series[0].shared_by == {POWER_W: ("0000:c1:00.0", "0000:c6:00.0")}
    assert counter_cell(None) == "-"


def test_a_counter_too_short_to_check_says_so_in_the_table() -> None:
    from accelbench.core.energy import summarize
    from accelbench.report.energy import counter_cell

    energy = summarize(_step_series(2.0, (1.0, 2.0)))  # a 1 s window of 1 s averages
    assert energy.counter_suspect is None and energy.energy_j == pytest.approx(700.0)
    assert counter_cell(energy).endswith("unchecked")


@pytest.mark.parametrize("values", [(3.0, 1.0, 2.0), (4.0, 1.0, 3.0, 2.0)])
def test_a_measured_figure_keeps_the_interval_of_its_median_process(values) -> None:
    """Merged over processes, a measured figure with its own interval (a serving case's
    TTFT mean) is the median, within the interval of the process(es) it came from."""
    from accelbench.core.measurement import Figure

    parts = [Measurement(CASE, "ok", timings=(Timing((1.0,), 1, 0, "load"),),
                         measured=(Figure("ttft_mean", v, "s", False, low=v - 0.1 * v,
                                          high=v + 0.1 * v),))
             for v in values]
    merged = merge_processes(parts).figure("ttft_mean")
    assert merged is not None and merged.low is not None and merged.high is not None
    assert merged.low <= merged.value <= merged.high
    middle = sorted(values)[(len(values) - 1) // 2: len(values) // 2 + 1]
    assert merged.low == pytest.approx(min(middle) * 0.9)
    assert merged.high == pytest.approx(max(middle) * 1.1)
