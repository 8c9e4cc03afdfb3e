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


def _stacked(run: StoredRun, stack: str) -> StoredRun:
    import dataclasses

    return dataclasses.replace(run, record=dataclasses.replace(run.record, generation_key=stack))


def test_a_node_state_holds_the_newest_of_each_case_and_where_it_came_from() -> None:
    from accelbench.analysis.latest import node_states

    quick = _run("r1", "a", 100.0, (GEMM, 1.0, 101.0), (COPY, 5.0, 102.0))
    rerun = _run("r2", "a", 200.0, (GEMM, 2.0, 201.0))
    empty = _run("r3", "a", 300.0)  # a newest run that measured nothing (it failed early)
    other = _run("r4", "b", 150.0, (GEMM, 3.0, 151.0))
    for order in ([quick, rerun, empty, other], [other, empty, rerun, quick]):
        a, b = node_states(order)
        assert (a.host, a.device, a.run.record.id) == ("a", "cuda:0", "r3")
        # Oldest run first, then by place in the run: the copy of r1, the GEMM of r2.
        assert [(c.measurement.case.benchmark, c.run.id) for c in a.cases] == [
            ("memory", "r1"), ("gemm", "r2")]
        assert a.run_ids == ("r1", "r2") and a.newest_run_id == "r2"
        assert a.run_by_case() == {COPY.key: "r1", GEMM.key: "r2"}
        assert [m.figures[0].value for m in a.measurements] == [5.0, 2.0]
        assert (b.host, b.run_ids, b.newest_run_id) == ("b", ("r4",), "r4")
    assert node_states([empty])[0].newest_run_id == "r3"  # no measurement: its newest run


def test_a_node_state_is_of_its_newest_runs_stack() -> None:
    from accelbench.analysis.latest import node_states

    old = _stacked(_run("r1", "a", 100.0, (GEMM, 1.0, 101.0), (COPY, 5.0, 102.0)), "old")
    new = _stacked(_run("r2", "a", 200.0, (GEMM, 2.0, 201.0)), "new")
    [state] = node_states([new, old])
    assert state.generation_key == "new" and state.run_ids == ("r2",)
    assert state.other_stack_runs == ("r1",)


def test_a_node_state_is_a_host_and_its_runs_device() -> None:
    from accelbench.analysis.latest import node_states

    on_1 = Case.make("gemm", "g1", "micro", {"shape": "4096", "dtype": "bf16"}, "cuda:1")
    runs = [_run("r1", "a", 100.0, (GEMM, 1.0, 101.0)),
            _run("r2", "a", 200.0, (on_1, 2.0, 201.0), device="cuda:1")]
    assert [(s.host, s.device, s.run_ids) for s in node_states(runs)] == [
        ("a", "cuda:0", ("r1",)), ("a", "cuda:1", ("r2",))]
    assert node_states([]) == ()
