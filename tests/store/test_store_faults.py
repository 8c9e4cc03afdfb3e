"""A store that stops answering or breaks in mid-run: the run fails fast, with its exit
code and one line, and nothing it measured is lost (it is spooled, and `merge` completes
the run from the spool). A PostgreSQL server frozen with SIGSTOP (a paused VM, a
partition: the kernel still acknowledges, so TCP sees nothing wrong) is a real server
of its own here, since freezing the shared one would stop every other test."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

import pytest

import _pgcluster
from accelbench.cli.main import main
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseFailed, CaseResult, Rate, from_result
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark, Registry
from accelbench.core.request import RunRequest
from accelbench.env.fingerprint import collect
from accelbench.env.vendor_tools import MISSING, ToolRun
from accelbench.errors import EXIT_STORE, EXIT_STORE_UNREACHABLE, StoreError, StoreUnreachable
from accelbench.runner import messages
from accelbench.runner.plan import validate
from accelbench.runner.session import run_session
from accelbench.store import Store
from fakes import FakeClock
from postgres import is_postgres, sql

CPU = DeviceInfo(type="cpu", index=None, name="Test CPU", platform="cpu")


def _noop(ctx, params):  # pragma: no cover - the fake worker measures instead
    raise CaseFailed("not run")


REGISTRY = Registry([Benchmark(name, "micro", "test", "test_store_faults:_noop",
                               (Param("n", "int", 1),)) for name in ("a", "b", "c")])


class Worker:
    """A worker that measures in this process; `before_case[i]` runs before case i."""

    before_case: ClassVar[dict[int, Callable[[], None]]] = {}
    cases: ClassVar[int] = 0  # asked of every worker so far

    def __init__(self, env=None) -> None:
        pass

    def ask(self, message, timeout):
        if isinstance(message, messages.ReadFingerprint):
            fingerprint = collect("cpu", run=lambda argv, timeout: ToolRun(problem=MISSING),
                                  environ={})
            return messages.FingerprintRead(fingerprint.to_dict())
        Worker.cases += 1
        hook = Worker.before_case.get(Worker.cases)
        if hook is not None:
            hook()
        ctx = CaseContext(CPU, FakeClock(1e-3), message.policy)
        result = CaseResult(ctx.time(lambda: None), rates=(Rate("throughput", 1.0, "item/s"),))
        return messages.CaseMeasured(from_result(message.planned.case, result, (), 0.0,
                                                 0.1).to_dict())

    def stop(self) -> None:
        pass

    def kill(self) -> None:
        pass


@pytest.fixture(autouse=True)
def _fresh(tmp_path: Path, monkeypatch) -> None:
    Worker.cases = 0
    Worker.before_case = {}
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data-home"))


def _run(store: Store) -> None:
    request = RunRequest(benches=("a", "b", "c"), timing={"processes": 1})
    run_session(validate(request, REGISTRY), store, worker_factory=Worker)


# -- a server of its own, to freeze ----------------------------------------------------


@pytest.fixture
def own_cluster() -> Iterator[_pgcluster.Cluster]:
    bindir = _pgcluster.bin_dir()
    if bindir is None:
        if os.environ.get("CI") == "true":
            pytest.fail("no PostgreSQL server binaries: install Debian's postgresql")
        pytest.skip("no PostgreSQL server binaries")
    cluster = _pgcluster.start(bindir)
    try:
        yield cluster
    finally:
        _signal(cluster, signal.SIGCONT)
        cluster.stop()


def _server_pids(cluster: _pgcluster.Cluster) -> list[int]:
    """The postmaster and every process it started (the backends among them)."""
    postmaster = int((cluster.directory / "data" / "postmaster.pid").read_text().split()[0])
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == postmaster:
                children.append(int(entry))
    return [postmaster, *children]


def _signal(cluster: _pgcluster.Cluster, sig: signal.Signals) -> None:
    for pid in _server_pids(cluster):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


@pytest.mark.slow
def test_connecting_to_a_frozen_server_fails_within_its_deadline(own_cluster) -> None:
    url = own_cluster.url(own_cluster.create_database("frozen"))
    Store.open(url).close()
    _signal(own_cluster, signal.SIGSTOP)
    # A hang would run into this subprocess's timeout; libpq gives up after 2 s.
    done = subprocess.run([sys.executable, "-m", "accelbench", "runs", "--store",
                           url + "?connect_timeout=2"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == EXIT_STORE_UNREACHABLE, done.stderr
    assert done.stderr.count("\n") == 1 and "cannot reach result store" in done.stderr


@pytest.mark.slow
def test_a_server_frozen_mid_run_fails_the_run_and_loses_nothing(own_cluster, monkeypatch,
                                                                  tmp_path: Path,
                                                                  capsys) -> None:
    url = own_cluster.url(own_cluster.create_database("midrun"))
    monkeypatch.setenv("ACCELBENCH_STORE_TIMEOUT", "2")
    Worker.before_case = {2: lambda: _signal(own_cluster, signal.SIGSTOP)}
    with Store.open(url) as store, pytest.raises(StoreUnreachable) as lost:
        _run(store)
    message = str(lost.value)
    assert "did not answer within 2 s" in message and "\n" not in message
    spool = Path(message.split(" are kept in ")[1].split(":")[0])
    assert spool.parent == tmp_path / "data-home" / "accelbench" / "spool"
    _signal(own_cluster, signal.SIGCONT)

    # Case a was stored before the freeze, b was measured during it; c never ran.
    with Store.open(url, create=False) as store:
        (record,) = store.list_runs()
        assert record.status == "running" and record.n_ok == 1
    with Store.open(spool, create=False) as kept:
        (spooled,) = [kept.load_run(r.id) for r in kept.list_runs()]
    assert spooled.record.id == record.id and spooled.record.status == "failed"
    assert [m.case.benchmark for m in spooled.measurements] == ["a", "b"]

    assert main(["merge", str(spool), "--into", url, "--json"]) == 0
    assert '"added": 1' in capsys.readouterr().out
    with Store.open(url, create=False) as store:
        merged = store.load_run(record.id)
    assert merged.record.status == "failed" and merged.record.finished_at is not None
    assert [m.case.benchmark for m in merged.measurements] == ["a", "b"]
    assert main(["merge", str(spool), "--into", url, "--json"]) == 0  # once only
    assert '"added": 0' in capsys.readouterr().out


@pytest.mark.slow
def test_a_statement_the_server_holds_too_long_fails_within_the_deadline(
        own_cluster, monkeypatch) -> None:
    """A server that answers but holds a statement (a lock another client keeps) is cut
    by the same deadline, its own statement_timeout."""
    url = own_cluster.url(own_cluster.create_database("locked"))
    Store.open(url).close()
    monkeypatch.setenv("ACCELBENCH_STORE_TIMEOUT", "2")
    import psycopg

    with psycopg.connect(url) as holder, Store.open(url) as store:
        holder.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(StoreUnreachable, match="within 2 s"):
            store.list_runs()


# -- a store that breaks: both back-ends -----------------------------------------------


def test_a_store_missing_a_table_is_refused_before_a_run_begins(store_location: str,
                                                                capsys) -> None:
    Store.open(store_location).close()
    sql(store_location, "DROP VIEW measurement_cases")
    sql(store_location, "DROP TABLE measurements")
    with pytest.raises(StoreError, match="is damaged: it has no measurements table"):
        Store.open(store_location)
    assert main(["runs", "--store", store_location]) == EXIT_STORE
    assert "damaged" in capsys.readouterr().err
    assert sql(store_location, "SELECT count(*) FROM runs") == [(0,)]


def test_a_table_dropped_mid_run_fails_the_run_and_keeps_what_it_measured(
        store_location: str, tmp_path: Path) -> None:
    def drop() -> None:
        sql(store_location, "DROP VIEW measurement_cases")
        sql(store_location, "DROP TABLE measurements")

    Worker.before_case = {2: drop}
    with Store.open(store_location) as store, pytest.raises(StoreError) as lost:
        _run(store)
    assert lost.value.exit_code == EXIT_STORE and "kept in" in str(lost.value)
    # The store still answers, so it was told: the run is failed, not left running.
    assert sql(store_location, "SELECT status FROM runs") == [("failed",)]
    spool = Path(str(lost.value).split(" are kept in ")[1].split(":")[0])
    with Store.open(spool, create=False) as kept:
        (run,) = [kept.load_run(r.id) for r in kept.list_runs()]
    assert [m.case.benchmark for m in run.measurements] == ["a", "b"]
    if not is_postgres(store_location):
        assert spool.parent == Path(store_location).parent / "spool"
