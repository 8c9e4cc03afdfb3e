"""The host's own speed, timed beside every CPU process of a run, is a floor under the
spread of each CPU case's processes: three processes that agree by chance do not state an
interval narrower than the cores they ran on moved."""

from __future__ import annotations

import dataclasses
import json
import math
import statistics

import numpy as np
import pytest
from test_interleaving import FakeWorker

from accelbench.analysis import evidence as ev
from accelbench.core.between import FLOORED, METHOD_BETWEEN, between_processes
from accelbench.core.case import Case
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import (
    HOST_SPEED,
    CaseResult,
    Measurement,
    Rate,
    from_result,
    merge_processes,
)
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark, Registry
from accelbench.core.request import RunRequest
from accelbench.core.timing import Timing
from accelbench.env.host.reference import MIN_SPEEDS, speed_of, speed_sd
from accelbench.runner import messages
from accelbench.runner.plan import validate
from accelbench.runner.rounds import HostSpeeds
from accelbench.runner.session import run_session
from accelbench.store import Store
from fakes import FakeClock

CPU = DeviceInfo(type="cpu", index=None, name="Test CPU", platform="cpu")
REFERENCE = "SHA-256 of 8 MiB (OpenSSL, Python 3.11), fastest of 3"
T_2 = 4.302653  # Student's t(0.975, 2 degrees of freedom), from the printed tables


def _host(*seconds: float, reference: str = REFERENCE) -> dict[str, object]:
    return {"format_version": 2, "reference": reference, "reference_s": list(seconds)}


def test_a_floor_widens_only_an_interval_narrower_than_it() -> None:
    agreeing = [1.0e-3, 1.0e-3 * (1 + 1e-5), 1.0e-3 * (1 - 1e-5)]
    plain = between_processes(agreeing)
    floored = between_processes(agreeing, floor=0.02)
    assert plain.rel_half_width < 1e-4 and plain.method == METHOD_BETWEEN
    half = T_2 * 0.02 * math.sqrt(2 / 3)  # the case's own degrees of freedom are kept
    assert floored.low == pytest.approx(floored.center * math.exp(-half))
    assert floored.high == pytest.approx(floored.center * math.exp(half))
    assert floored.method.endswith(FLOORED) and floored.center == plain.center
    spread_out = [0.9e-3, 1.0e-3, 1.1e-3]
    assert between_processes(spread_out, floor=0.02) == between_processes(spread_out)


def test_the_floor_keeps_a_repeat_run_inside_the_interval() -> None:
    """Three processes of a case whose own noise is small beside the host's: the host's
    speed moves each process (and each run) by 3%. Without the floor, chance agreement of
    three values leaves repeat runs outside; with it, 95% holds or is exceeded."""
    rng = np.random.default_rng(11)
    plain = floored = 0
    trials = 2000
    for _ in range(trials):
        run_a = np.exp(rng.normal(0.0, 0.03, 3) + rng.normal(0.0, 0.01))
        run_b = np.exp(rng.normal(0.0, 0.03, 3) + rng.normal(0.0, 0.01))
        repeat = math.exp(np.log(run_b).mean())
        s = between_processes(list(run_a))
        plain += s.low <= repeat <= s.high
        s = between_processes(list(run_a), floor=0.03)
        floored += s.low <= repeat <= s.high
    assert plain / trials < 0.95 <= floored / trials


def test_the_reference_speed_of_a_process_and_the_spread_of_many() -> None:
    found = speed_of(_host(0.02, 0.0225))
    assert found is not None and found[0] == REFERENCE
    assert found[1] == pytest.approx(1 / math.sqrt(0.02 * 0.0225))
    for damaged in ({}, _host(), {"reference": 3, "reference_s": [0.02]},
                    _host(-1.0, float("nan"), True)):
        assert speed_of(damaged) is None
    speeds = [50.0 * (1 + 0.01 * k) for k in range(MIN_SPEEDS)]
    assert speed_sd(speeds) == pytest.approx(statistics.stdev(map(math.log, speeds)))
    assert speed_sd(speeds[:-1]) is None  # too few readings say little of the host


def _part(per_call: float, *reference_s: float, device: str = "cpu",
          samples: tuple[float, ...] | None = None) -> Measurement:
    case = Case.make("gemm", "1", "micro", {"shape": 512}, device)
    timing = Timing(samples or (per_call,) * 5, 1, 0, "converged")
    return Measurement(case, "ok", timings=(timing,), rates=(Rate("flops", 1e9, "FLOP/s"),),
                       hosts=(_host(*reference_s),) if reference_s else ())


def test_host_speeds_pool_the_cpu_processes_of_a_run() -> None:
    speeds = HostSpeeds()
    for k in range(MIN_SPEEDS - 1):
        speeds.add(_part(1e-3, 0.020 + 0.0002 * k))
    assert speeds.spread() is None
    speeds.add(_part(1e-3, device="cuda:0"))  # a GPU case's process is not the host's
    speeds.add(_part(1e-3))  # nor one that timed no reference
    assert speeds.spread() is None
    speeds.add(_part(1e-3, 0.0215))
    found = speeds.spread()
    assert found is not None and found["readings"] == MIN_SPEEDS
    assert found["reference"] == REFERENCE
    expected = speed_sd([1 / (0.020 + 0.0002 * k) for k in range(MIN_SPEEDS - 1)] + [1 / 0.0215])
    assert found["sd"] == pytest.approx(expected, abs=1e-6)
    other = dataclasses.replace(_part(1e-3), hosts=(_host(0.02, reference="another"),))
    speeds.add(other)
    assert speeds.spread() is None  # two kinds of reference work: no common spread


def test_a_recorded_floor_widens_the_figure_in_show_and_compare_alike() -> None:
    parts = [_part(1e-3 * (1 + d), 0.02) for d in (0.0, 1e-5, -1e-5)]
    plain = merge_processes(parts)
    floored = merge_processes(parts, host_speed={"sd": 0.02, "readings": 30,
                                                 "reference": REFERENCE})
    assert floored.host_speed_sd == 0.02 and plain.host_speed_sd == 0.0
    figure = floored.figure("flops")
    assert figure is not None and figure.low is not None and figure.high is not None
    assert figure.high / figure.low == pytest.approx(math.exp(2 * T_2 * 0.02 * math.sqrt(2 / 3)))
    again = Measurement.from_dict(json.loads(json.dumps(floored.to_dict())))
    assert again == floored and again.details[HOST_SPEED]["readings"] == 30
    # compare's evidence for one run floors its processes' spread the same way
    values = [1 / (1e-3 * (1 + d)) for d in (0.0, 1e-5, -1e-5)]
    side = ev.side([values], process_floor=floored.host_speed_sd)
    assert side.var == pytest.approx(0.02**2 / 3) and side.df == 2
    bare = ev.side([values]).var
    assert bare is not None and bare < 1e-9


@pytest.mark.parametrize("damaged", ["0.02", float("nan"), -0.1, 5.0, True, None])
def test_a_damaged_floor_in_a_record_is_ignored(damaged) -> None:
    parts = [_part(1e-3 * (1 + d)) for d in (0.0, 0.01, -0.01)]
    merged = merge_processes(parts, host_speed={"sd": damaged})
    assert merged.host_speed_sd == 0.0
    assert merged.spread == merge_processes(parts).spread
    assert dataclasses.replace(merged, details={HOST_SPEED: "x"}).host_speed_sd == 0.0


def test_a_rate_over_the_mean_states_the_interval_of_the_means() -> None:
    """The medians agree, the means do not: the figure is taken over the means, so its
    interval is too."""
    case = Case.make("train", "1", "model", {"model": "tiny"}, "cpu")
    timings = tuple(Timing((1.0, 1.0, 1.0, tail), 1, 0, "converged") for tail in (2.0, 4.0, 3.0))
    m = Measurement(case, "ok", timings=timings,
                    rates=(Rate("throughput", 8.0, "sample/s", over="mean"),))
    means = [statistics.fmean(t.samples) for t in timings]
    expected = between_processes(means)
    figure = m.figure("throughput")
    assert figure is not None and figure.low is not None and figure.high is not None
    assert figure.value == pytest.approx(8.0 / expected.center)
    assert figure.low == pytest.approx(8.0 / expected.high)
    assert figure.high == pytest.approx(8.0 / expected.low)
    assert m.spread is not None and m.spread.rel_half_width == 0.0  # the medians agree


class ReferenceWorker(FakeWorker):
    """A worker in this process whose every case costs 1 ms (its processes agree) and
    whose host's reference work took a little longer in each new process."""

    def ask(self, message, timeout):
        if not isinstance(message, messages.MeasureCase):
            return super().ask(message, timeout)
        ctx = CaseContext(CPU, FakeClock(1e-3), message.policy)
        result = CaseResult(ctx.time(lambda: None), rates=(Rate("throughput", 1.0, "item/s"),))
        m = from_result(message.planned.case, result, (), 0.0, 0.1)
        reference = 0.020 * (1 + 0.01 * (self.id % 5))
        m = dataclasses.replace(m, hosts=(_host(reference, reference),))
        return messages.CaseMeasured(m.to_dict())


NAMES = ("a", "b", "c", "d")
REGISTRY = Registry([Benchmark(name, "micro", "test", "test_interleaving:_noop",
                               (Param("n", "int", 1),)) for name in NAMES])


def test_a_run_records_the_hosts_speed_spread_with_each_cpu_case(store_path) -> None:
    request = RunRequest(benches=NAMES, timing={"processes": 3})
    with Store.open(store_path) as store:
        outcome = run_session(validate(request, REGISTRY), store,
                              worker_factory=ReferenceWorker)
        stored = store.load_run(outcome.run_id)
    # Each case is recorded after its third process: by then the first two rounds of
    # every case and the third of those before it have timed the reference.
    found = {m.case.benchmark: m.details[HOST_SPEED] for m in stored.measurements}
    assert [found[name]["readings"] for name in NAMES] == [9, 10, 11, 12]
    last = stored.measurements[-1]
    assert last.host_speed_sd == pytest.approx(found["d"]["sd"]) and last.host_speed_sd > 0
    figure = last.figure("time")
    assert figure is not None and figure.low is not None and figure.high is not None
    # The processes agreed exactly; the interval is the host's.
    half = T_2 * last.host_speed_sd * math.sqrt(2 / 3)
    assert figure.high / figure.low == pytest.approx(math.exp(2 * half))


class _Recorder:
    """What `Rounds` needs of a run's recorder: the cases it records, in order."""

    def __init__(self) -> None:
        from accelbench.runner.recorder import SilentListener

        self.listener = SilentListener()
        self.recorded: list[Measurement] = []

    def record(self, index: int, m: Measurement) -> None:
        self.recorded.append(m)


def test_ranks_of_a_job_share_the_cores_and_are_not_the_hosts_speed() -> None:
    from accelbench.core.timing import TimingPolicy
    from accelbench.runner.plan import PlannedCase
    from accelbench.runner.rounds import Rounds

    bench = REGISTRY.get("a")
    single = PlannedCase(bench, _part(1e-3).case, {}, 1)
    ranked = PlannedCase(bench, _part(1e-3).case, {}, 2)
    speeds = HostSpeeds()
    policy = TimingPolicy(processes=MIN_SPEEDS)
    recorder = _Recorder()
    for planned in (ranked, single):
        rounds = Rounds([planned], 0, policy, recorder, speeds=speeds)  # type: ignore[arg-type]
        for k in range(MIN_SPEEDS):
            rounds.add(0, _part(1e-3, 0.020 * (1 + 0.01 * k)))
    on_ranks, alone = recorder.recorded
    assert HOST_SPEED not in on_ranks.details  # nothing pooled yet: only ranks had run
    assert alone.details[HOST_SPEED]["readings"] == MIN_SPEEDS  # its own processes only
