"""Each case is measured in several fresh worker processes, interleaved across the run's
cases (A1 B1 C1 A2 B2 C2 ...), and its interval is taken between those processes.

The workers here are fakes that measure in this process with a seeded fake clock, so
the order, the grouping by process and the statistics are checked without timing.
"""

from __future__ import annotations

import itertools
import math
from typing import ClassVar

import numpy as np
import pytest
from sample_benches import SAMPLE_REGISTRY

from accelbench.core.between import METHOD_BETWEEN, METHOD_WITHIN, between_processes
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseFailed, CaseResult, Rate, from_result, not_measured
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark, Registry
from accelbench.core.request import RunRequest
from accelbench.env.fingerprint import collect
from accelbench.runner import messages
from accelbench.runner.plan import validate
from accelbench.runner.session import run_session
from accelbench.store import Store
from fakes import FakeClock, no_vendor_tools

CPU = DeviceInfo(type="cpu", index=None, name="Test CPU", platform="cpu")
_ids = itertools.count(1)


class FakeWorker:
    """Answers like a worker process, in this process; each instance is one 'process'
    whose calls cost `base × factor` seconds, the factor drawn per process."""

    log: ClassVar[list[tuple[int, str]]] = []  # (process id, case), in the order measured
    fail: ClassVar[set[tuple[str, int]]] = set()  # (benchmark, process number) that fail

    def __init__(self, env=None) -> None:
        self.id = next(_ids)
        rng = np.random.default_rng(self.id)
        self.factor = float(np.exp(rng.normal(0.0, 0.1)))
        self.rounds: dict[str, int] = {}

    def ask(self, message, timeout):
        if isinstance(message, messages.ReadFingerprint):
            return messages.FingerprintRead(collect("cpu", run=no_vendor_tools,
                                                    environ={}).to_dict())
        planned = message.planned
        FakeWorker.log.append((self.id, planned.case.benchmark))
        seen = sum(1 for _, name in FakeWorker.log if name == planned.case.benchmark)
        if (planned.case.benchmark, seen) in FakeWorker.fail:
            return messages.CaseMeasured(not_measured(planned.case, "failed", "wrong",
                                                      0.0, 0.0).to_dict())
        clock = FakeClock(1e-3 * self.factor, noise=0.01, seed=self.id)
        ctx = CaseContext(CPU, clock, message.policy)
        timing = ctx.time(lambda: None)
        result = CaseResult(timing, rates=(Rate("throughput", 1.0, "item/s"),),
                            details={"process": self.id})
        return messages.CaseMeasured(from_result(planned.case, result, (), 0.0, 0.1).to_dict())

    def stop(self) -> None:
        pass

    def kill(self) -> None:
        pass


def _noop(ctx, params):  # pragma: no cover - the fake worker measures instead
    raise CaseFailed("not run")


REGISTRY = Registry([
    Benchmark(name, "micro", "test", "test_interleaving:_noop",
              (Param("n", "int", 1),))
    for name in ("a", "b", "c")
])


@pytest.fixture(autouse=True)
def _fresh_log():
    FakeWorker.log = []
    FakeWorker.fail = set()


def run(store_path, processes: int):
    request = RunRequest(benches=("a", "b", "c"), timing={"processes": processes})
    with Store.open(store_path) as store:
        outcome = run_session(validate(request, REGISTRY), store, worker_factory=FakeWorker)
        stored = store.load_run(outcome.run_id)
    return outcome, stored


def test_cases_are_interleaved_over_fresh_processes(store_path) -> None:
    outcome, stored = run(store_path, 3)
    order = [name for _, name in FakeWorker.log]
    assert order == ["a", "b", "c"] * 3
    processes = [pid for pid, _ in FakeWorker.log]
    # One process per round, never reused by a later round.
    assert processes[0:3] == [processes[0]] * 3 and len(set(processes)) == 3
    for m in stored.measurements:
        assert len(m.timings) == 3 and m.details["processes"] == 3
        assert m.spread.method == METHOD_BETWEEN and m.spread.processes == 3
        medians = [float(np.median(t.samples)) for t in m.timings]
        # The geometric mean of the processes' medians.
        assert m.figure("time").value == pytest.approx(math.exp(np.log(medians).mean()))
        low, high = m.figure("time").low, m.figure("time").high
        assert low <= m.figure("time").value <= high
        # The rate's interval is the time's, inverted.
        rate = m.figure("throughput")
        assert rate.low == pytest.approx(1.0 / high) and rate.high == pytest.approx(1.0 / low)
    assert outcome.status == "complete"


def test_one_process_keeps_the_interval_within_it(store_path) -> None:
    _, stored = run(store_path, 1)
    assert [name for _, name in FakeWorker.log] == ["a", "b", "c"]
    m = stored.measurements[0]
    assert m.spread.method == METHOD_WITHIN
    assert (m.figure("time").low, m.figure("time").high) == (m.stats.ci_low, m.stats.ci_high)


def test_a_failure_in_a_later_process_fails_the_case_at_once(store_path) -> None:
    FakeWorker.fail = {("b", 2)}
    outcome, stored = run(store_path, 3)
    assert [name for _, name in FakeWorker.log] == ["a", "b", "c", "a", "b", "c", "a", "c"]
    by_name = {m.case.benchmark: m for m in stored.measurements}
    assert by_name["b"].status == "failed"
    assert by_name["b"].reason == "wrong (in process 2 of 3)"
    assert [m.case.benchmark for m in stored.measurements] == ["b", "a", "c"]  # as they end
    assert outcome.exit_code == 1


def test_an_interrupted_run_stores_what_each_case_measured_so_far(store_path) -> None:
    class Interrupting(FakeWorker):
        def ask(self, message, timeout):
            if isinstance(message, messages.MeasureCase) and len(FakeWorker.log) == 4:
                raise KeyboardInterrupt
            return super().ask(message, timeout)

    request = RunRequest(benches=("a", "b", "c"), timing={"processes": 3})
    with Store.open(store_path) as store:
        outcome = run_session(validate(request, REGISTRY), store, worker_factory=Interrupting)
        stored = store.load_run(outcome.run_id)
    assert outcome.interrupted and stored.record.status == "interrupted"
    assert {m.case.benchmark: len(m.timings) for m in stored.measurements} == \
        {"a": 2, "b": 1, "c": 1}
    assert all("interrupted after" in m.warnings[-1] for m in stored.measurements)


def test_the_interval_between_processes_matches_its_definition() -> None:
    values = [1.02e-3, 0.97e-3, 1.10e-3, 1.01e-3, 0.99e-3]
    spread = between_processes(values, 0.95)
    logs = np.log(values)
    n = len(values)
    # Independently: the prediction interval for the mean of n new values, with Student's
    # t(0.975, 4 degrees of freedom) from the printed tables.
    t = 2.776445
    half = t * logs.std(ddof=1) * math.sqrt(1 / n + 1 / n)
    assert spread.center == pytest.approx(math.exp(logs.mean()))  # the centre of the interval
    assert spread.low == pytest.approx(math.exp(logs.mean() - half))
    assert spread.high == pytest.approx(math.exp(logs.mean() + half))
    # It covers the mean of a repeat set of processes about 95% of the time.
    rng = np.random.default_rng(7)
    hits = 0
    trials = 2000
    for _ in range(trials):
        first = np.exp(rng.normal(0.0, 0.1, n))
        second = np.exp(rng.normal(0.0, 0.1, n))
        s = between_processes(list(first), 0.95)
        hits += s.low <= math.exp(np.log(second).mean()) <= s.high
    assert 0.93 <= hits / trials <= 0.97


@pytest.mark.slow
def test_sample_registry_still_runs_in_real_workers(store_path) -> None:
    """The real worker process path, two rounds: each round in its own process."""
    request = RunRequest(benches=("pid",), timing={"processes": 2, "max_time": 0.05,
                                                 "warmup_time": 0.0})
    with Store.open(store_path) as store:
        outcome = run_session(validate(request, SAMPLE_REGISTRY), store)
    (m,) = outcome.measurements
    assert len(m.timings) == 2 and m.details["processes"] == 2


@pytest.mark.slow
def test_distributed_rounds_are_fresh_torchrun_jobs(store_path, monkeypatch) -> None:
    """Each round of a distributed segment is its own torchrun job, sampled on its own."""
    import os
    from pathlib import Path

    from sample_benches import DIST_REGISTRY

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, (str(Path(__file__).parent), os.environ.get("PYTHONPATH")))))
    request = RunRequest(benches=("dist_sum",), nproc_per_node=2,
                      timing={"processes": 2, "max_time": 0.1, "warmup_time": 0.0})
    with Store.open(store_path) as store:
        outcome = run_session(validate(request, DIST_REGISTRY), store)
    (m,) = outcome.measurements
    assert m.ok and len(m.timings) == 2 and m.details["processes"] == 2
    assert len(m.hosts) == 2
