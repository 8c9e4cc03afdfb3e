"""A CPU case's default thread count is a fixed function of the CPUs this process may run
on, never of the host's load at that moment, and the run says how it was chosen: the
count is part of each CPU case's identity, so the same command must plan the same cases
whether the host is busy or idle."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from accelbench.benchmarks import REGISTRY
from accelbench.core.context import DistInfo
from accelbench.core.device import DeviceInfo
from accelbench.core.request import RunRequest
from accelbench.env import host
from accelbench.env.cluster import Cluster
from accelbench.env.fingerprint import Fingerprint
from accelbench.env.host import HostReport
from accelbench.runner import capacity
from accelbench.runner.capacity import GIB, NodeResources, threads_source, usable_cpus
from accelbench.runner.plan import PlannedCase, validate
from accelbench.runner.rank_session import RankExecutor
from accelbench.runner.session import Supervised

CPU = DeviceInfo(type="cpu", index=None, name="Test CPU", platform="cpu")
GEMM = RunRequest(benches=("gemm",), device="cpu", dtypes=("fp32",), overrides={"shape": ("64",)})
COLLECTIVES = RunRequest(benches=("collectives",), device="cpu", nproc_per_node=2,
                      overrides={"op": ("all-reduce",), "bytes": ("1024",)})


def _fingerprint() -> Fingerprint:
    return Fingerprint(device=CPU, data={"devices": {"count": 1}})


def _affinity(monkeypatch: pytest.MonkeyPatch, cpus: int, host_cpus: int = 64) -> None:
    """This process may run on `cpus` of the host's `host_cpus` CPUs."""
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: host_cpus)
    monkeypatch.setattr(capacity, "node_resources", lambda: NodeResources(cpus, 64 * GIB))


def _busy_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every look at the host finds it busy: other work on all but one of its cores."""
    busy = HostReport(window_s=0.5, samples=3, cpus=8, others_busy_cores=7.0,
                      contended=True, reasons=("other processes used 7.0 cores",))
    monkeypatch.setattr(host, "snapshot_quiet", lambda *a, **k: (False, busy))


def _plan(request: RunRequest) -> tuple[Fingerprint, list[PlannedCase]]:
    return Supervised(validate(request, REGISTRY)).plan(_fingerprint())


def _threads(cases: list[PlannedCase]) -> list[Any]:
    return [c.case.param_dict["threads"] for c in cases]


def test_the_default_is_all_but_one_of_the_cpus_this_process_may_use_not_the_hosts(
        ) -> None:
    with pytest.MonkeyPatch.context() as mp:
        _affinity(mp, 4)
        assert usable_cpus() == 4
        fingerprint, cases = _plan(GEMM)
    assert cases and _threads(cases) == [3] * len(cases)
    assert fingerprint.data["threads_source"] == (
        "default: 3 of the 4 CPUs this process may use (one left to the harness)")


def test_the_default_is_the_same_whatever_the_host_load() -> None:
    with pytest.MonkeyPatch.context() as mp:
        _affinity(mp, 8)
        idle = _plan(GEMM)
        _busy_host(mp)
        busy = _plan(GEMM)
    assert [c.case.key for c in busy[1]] == [c.case.key for c in idle[1]]
    assert _threads(busy[1]) == [7]
    assert busy[0].data["threads_source"] == idle[0].data["threads_source"]


def test_the_default_follows_the_affinity_set() -> None:
    planned = {}
    for cpus in (1, 2, 6):
        with pytest.MonkeyPatch.context() as mp:
            _affinity(mp, cpus)
            planned[cpus] = _plan(GEMM)
    assert {n: _threads(cases) for n, (_, cases) in planned.items()} == {1: [1], 2: [1], 6: [5]}
    assert planned[1][0].data["threads_source"] == "default: the 1 CPU this process may use"


def test_without_an_affinity_set_the_default_is_every_cpu_of_the_host() -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.delattr("os.sched_getaffinity", raising=False)
        mp.setattr("os.cpu_count", lambda: 12)
        assert usable_cpus() == 12
        mp.setattr("os.cpu_count", lambda: None)
        assert usable_cpus() == 1


def test_threads_wins_over_the_default_and_says_so() -> None:
    with pytest.MonkeyPatch.context() as mp:
        _affinity(mp, 8)
        _busy_host(mp)
        fingerprint, cases = _plan(RunRequest(**{**GEMM.__dict__, "threads": 3}))
    assert _threads(cases) == [3]
    assert fingerprint.data["threads_source"] == "--threads 3"


def test_a_distributed_case_splits_the_count_between_its_ranks() -> None:
    with pytest.MonkeyPatch.context() as mp:
        _affinity(mp, 8)
        fingerprint, cases = _plan(COLLECTIVES)
        _, chosen = _plan(RunRequest(**{**COLLECTIVES.__dict__, "threads": 6}))
    assert [c.ranks for c in cases] == [2] and _threads(cases) == [3]  # 7 // 2
    assert _threads(chosen) == [3]
    assert fingerprint.data["threads_source"] == (
        "default: 7 of the 8 CPUs this process may use (one left to the harness), split "
        "between each distributed case's ranks")


def test_a_gpu_run_plans_no_threads_and_records_no_source() -> None:
    gpu = DeviceInfo(type="cuda", index=0, name="Test GPU", platform="cuda")
    valid = validate(RunRequest(benches=("gemm",), dtypes=("fp32",),
                             overrides={"shape": ("64",)}), REGISTRY)
    fingerprint, cases = Supervised(valid).plan(
        Fingerprint(device=gpu, data={"devices": {"count": 1}}))
    assert cases and all("threads" not in c.case.param_dict for c in cases)
    assert "threads_source" not in fingerprint.data


def _rank_plan(request: RunRequest, local_world: int) -> tuple[Fingerprint, list[PlannedCase]]:
    """What one rank of a torchrun job of `local_world` ranks on this node plans."""
    executor = RankExecutor(validate(request, REGISTRY))
    executor._info = DistInfo(rank=0, world_size=local_world, local_rank=0,
                              local_world_size=local_world, backend="gloo")
    executor._backend = "gloo"
    executor._cluster = Cluster.one_node("node-a", local_world, {})
    return executor.plan(_fingerprint())


def test_every_rank_of_a_torchrun_job_shares_the_cpus_and_ignores_the_load() -> None:
    with pytest.MonkeyPatch.context() as mp:
        _affinity(mp, 8)
        idle = _rank_plan(GEMM, 4)
        _busy_host(mp)
        busy = _rank_plan(GEMM, 4)
        _, chosen = _rank_plan(RunRequest(**{**GEMM.__dict__, "threads": 5}), 4)
    assert _threads(idle[1]) == _threads(busy[1]) == [1]  # 7 // 4
    assert [c.case.key for c in busy[1]] == [c.case.key for c in idle[1]]
    assert idle[0].data["threads_source"] == (
        "default: 7 of the 8 CPUs this process may use (one left to the harness), split "
        "between this node's 4 ranks")
    assert _threads(chosen) == [5]


def test_the_source_in_words() -> None:
    assert threads_source(None, 2) == (
        "default: 1 of the 2 CPUs this process may use (one left to the harness)")
    assert threads_source(None, 1) == "default: the 1 CPU this process may use"
    assert threads_source(4, 2) == "--threads 4"
    assert threads_source(4, 2, "x") == "--threads 4, split between x"


def test_the_run_record_says_how_the_count_was_chosen_and_show_prints_it(
        store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from accelbench.cli.main import main
    from accelbench.runner.recorder import RunRecorder
    from accelbench.store import Store

    with pytest.MonkeyPatch.context() as mp:
        _affinity(mp, 2)
        fingerprint, _ = _plan(GEMM)
    with Store.open(store_path) as store:
        recorder = RunRecorder(store, fingerprint, "quick", ["run"])
        recorder.finish(None)
        stored = store.load_run(recorder.run_id)
    expected = "default: 1 of the 2 CPUs this process may use (one left to the harness)"
    assert stored.fingerprint["threads_source"] == expected
    assert main(["show", recorder.run_id, "--store", str(store_path)]) == 0
    out = capsys.readouterr().out
    assert f"CPU threads per process: {expected}" in out
    assert main(["show", recorder.run_id, "--env", "--store", str(store_path)]) == 0
    assert "CPU threads per process" in capsys.readouterr().out
