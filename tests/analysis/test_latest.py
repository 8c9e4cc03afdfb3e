"""The newest run of each node and the newest measurement of each of its cases."""

from __future__ import annotations

from accelbench.analysis.latest import latest
from accelbench.core.case import Case
from accelbench.core.measurement import Figure
from accelbench.store import RunRecord, StoredRun
from fakes import stored_measurement

GEMM = Case.make("gemm", "g1", "micro", {"shape": "4096", "dtype": "bf16"}, "cuda:0")
COPY = Case.make("memory", "m1", "micro", {"op": "copy"}, "cuda:0")


def _run(run_id: str, host: str, started_at: float, *cases: tuple[Case, float, float],
         device: str = "cuda:0") -> StoredRun:
    record = RunRecord(run_id, started_at, started_at + 60, "complete", "quick", ("run",),
                       device, "stack", host, "0.1.0", f"fp-{host}", len(cases), 0, 0)
    ms = tuple(stored_measurement(case, figures=(Figure("throughput", value, "FLOP/s"),),
                                  started_at=at) for case, value, at in cases)
    return StoredRun(record, {}, ms)


def _values(runs: list[StoredRun]) -> dict[tuple[str, str, str], tuple[float, str]]:
    found = latest(runs)
    return {(c.node, c.device, c.measurement.case.benchmark):
            (c.measurement.figures[0].value, c.run.id) for c in found.cases}


def test_each_case_comes_from_the_newest_run_that_measured_it() -> None:
    old = _run("r1", "a", 100.0, (GEMM, 1.0, 101.0), (COPY, 5.0, 102.0))
    new = _run("r2", "a", 200.0, (GEMM, 2.0, 201.0))
    other = _run("r3", "b", 150.0, (GEMM, 3.0, 151.0))
    for order in ([old, new, other], [other, new, old]):
        assert _values(order) == {("a", "cuda:0", "gemm"): (2.0, "r2"),
                                  ("a", "cuda:0", "memory"): (5.0, "r1"),
                                  ("b", "cuda:0", "gemm"): (3.0, "r3")}
        found = latest(order)
        assert [r.record.id for r in found.runs] == ["r2", "r3"]


def test_a_measurement_is_dated_by_its_own_start_then_by_its_run() -> None:
    # Two runs of one node overlapping: the later measurement wins, not the later run.
    long_run = _run("r1", "a", 100.0, (GEMM, 1.0, 400.0))
    short_run = _run("r2", "a", 200.0, (GEMM, 2.0, 210.0))
    assert _values([long_run, short_run])[("a", "cuda:0", "gemm")] == (1.0, "r1")
    # Without a time of its own, the run's start decides, then the run id.
    undated = [_run("r1", "a", 100.0, (GEMM, 1.0, 0.0)), _run("r2", "a", 100.0, (GEMM, 2.0, 0.0))]
    assert _values(undated)[("a", "cuda:0", "gemm")] == (2.0, "r2")
    assert _values(undated[::-1])[("a", "cuda:0", "gemm")] == (2.0, "r2")


def test_devices_of_one_node_are_apart() -> None:
    on_1 = Case.make("gemm", "g1", "micro", {"shape": "4096", "dtype": "bf16"}, "cuda:1")
    runs = [_run("r1", "a", 100.0, (GEMM, 1.0, 101.0)),
            _run("r2", "a", 200.0, (on_1, 2.0, 201.0), device="cuda:1")]
    assert _values(runs) == {("a", "cuda:0", "gemm"): (1.0, "r1"),
                             ("a", "cuda:1", "gemm"): (2.0, "r2")}
    assert [(r.record.host, r.record.device) for r in latest(runs).runs] == [
        ("a", "cuda:0"), ("a", "cuda:1")]


def test_no_runs() -> None:
    found = latest([])
    assert found.runs == () and found.cases == ()
