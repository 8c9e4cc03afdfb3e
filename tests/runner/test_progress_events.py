"""What a run tells its listener as it goes: each process of each case as it begins and
once it has measured (process i of n, with its planned seconds), then the case once it is
recorded, so that a long run shows progress between its cases' results. The worker is a
scripted fake."""

from __future__ import annotations

import pytest
from sample_benches import SAMPLE_REGISTRY

from accelbench.core.request import RunRequest
from accelbench.runner.plan import validate
from accelbench.runner.session import SilentListener, run_session
from accelbench.store import Store
from scripted_worker import ScriptedWorker


class Recording(SilentListener):
    def __init__(self) -> None:
        self.events: list[tuple[object, ...]] = []

    def process_started(self, index, planned, process, processes, budget_s) -> None:
        self.events.append(("process", index, process, processes, budget_s))

    def process_done(self, index, process, processes, measurement) -> None:
        self.events.append(("done", index, process, measurement.status))

    def finished(self, index, measurement) -> None:
        self.events.append(("finished", index, measurement.status))


@pytest.fixture(autouse=True)
def _script():
    ScriptedWorker.reset()
    yield
    ScriptedWorker.reset()


def _run(store_path, processes: int) -> Recording:
    listener = Recording()
    request = RunRequest(benches=("ok",), overrides={"n": ("10", "20")},
                         timing={"processes": processes, "max_time": 0.5,
                                 "warmup_time": 0.25})
    with Store.open(store_path) as store:
        run_session(validate(request, SAMPLE_REGISTRY), store, listener=listener,
                    worker_factory=ScriptedWorker)
    return listener


def test_each_process_of_each_case_is_told_as_it_begins_and_ends(store_path) -> None:
    events = _run(store_path, 2).events
    # Rounds interleave the cases: process 1 of each, then process 2 of each.
    assert events == [
        ("process", 0, 1, 2, 0.75), ("done", 0, 1, "ok"),
        ("process", 1, 1, 2, 0.75), ("done", 1, 1, "ok"),
        ("process", 0, 2, 2, 0.75), ("done", 0, 2, "ok"), ("finished", 0, "ok"),
        ("process", 1, 2, 2, 0.75), ("done", 1, 2, "ok"), ("finished", 1, "ok"),
    ]


def test_a_case_that_fails_in_its_first_process_runs_no_other(store_path) -> None:
    ScriptedWorker.fail = {"ok n=10"}
    events = _run(store_path, 3).events
    assert events[:3] == [("process", 0, 1, 3, 0.75), ("done", 0, 1, "failed"),
                          ("finished", 0, "failed")]
    assert [e for e in events if e[:2] == ("process", 1)] == [
        ("process", 1, n, 3, 0.75) for n in (1, 2, 3)]
