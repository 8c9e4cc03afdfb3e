"""The one run lifecycle (runner.session.conduct) that every way of running cases goes
through, tried with an executor that records what it is asked to do."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from sample_benches import SAMPLE_REGISTRY

from accelbench.core.device import DeviceInfo
from accelbench.core.names import RUN_COMPLETE, RUN_FAILED, RUN_INTERRUPTED
from accelbench.core.request import RunRequest
from accelbench.env.fingerprint import Fingerprint
from accelbench.errors import UserError
from accelbench.runner.plan import PlannedCase, ValidRequest, expand, validate
from accelbench.runner.recorder import RunRecorder
from accelbench.runner.session import conduct
from accelbench.store import Store
from fakes import stored_measurement

CPU = DeviceInfo(type="cpu", index=None, name="Test CPU", platform="cpu")


class Scripted:
    """An executor that plans the request on a fake CPU and records each case as ok,
    or does what `then` says during `execute`."""

    def __init__(self, valid: ValidRequest, stores: bool = True, then: str = "") -> None:
        self.valid = valid
        self.stores = stores
        self.then = then
        self.calls: list[str] = []

    def fingerprint(self) -> Fingerprint:
        self.calls.append("fingerprint")
        if self.then == "no device":
            raise UserError("no such device")
        return Fingerprint(device=CPU, data={"devices": {"count": 1}})

    def plan(self, fingerprint: Fingerprint) -> tuple[Fingerprint, list[PlannedCase]]:
        self.calls.append("plan")
        return fingerprint, expand(self.valid, fingerprint.device)

    def execute(self, cases: Sequence[PlannedCase], recorder: RunRecorder | None
                ) -> str | None:
        self.calls.append("execute" if recorder else "execute unrecorded")
        if recorder is None:
            return None
        for index, planned in enumerate(cases):
            if self.then == "interrupt" and index == 1:
                raise KeyboardInterrupt
            recorder.record(index, stored_measurement(planned.case, samples=(1.0,)))
        return RUN_FAILED if self.then == "status" else None

    def interrupted(self, stop: KeyboardInterrupt, recorder: RunRecorder) -> None:
        self.calls.append("interrupted")
        recorder.interrupt(stop)

    def close(self) -> None:
        self.calls.append("close")


def _valid() -> ValidRequest:
    return validate(RunRequest(benches=("ok", "pid")), SAMPLE_REGISTRY)


def test_the_lifecycle_runs_in_order_and_stores_every_case(store_path) -> None:
    executor = Scripted(_valid())
    with Store.open(store_path) as store:
        opened: list[str] = []

        def open_store() -> Store:
            opened.append(",".join(executor.calls))
            return store

        outcome = conduct(executor, open_store, RunRequest(), ["run"])
        assert outcome is not None
        stored = store.load_run(outcome.run_id)
    # The store is opened once the cases are planned, before they run.
    assert opened == ["fingerprint,plan"]
    assert executor.calls == ["fingerprint", "plan", "execute", "close"]
    assert stored.record.status == RUN_COMPLETE
    assert [m.case.benchmark for m in stored.measurements] == ["ok", "pid"]


def test_bad_input_found_while_reading_the_device_begins_no_run(store_path) -> None:
    executor = Scripted(_valid(), then="no device")
    opened: list[bool] = []

    def open_store() -> Store:
        opened.append(True)
        return Store.open(store_path)

    with pytest.raises(UserError, match="no such device"):
        conduct(executor, open_store, RunRequest())
    assert not opened and executor.calls == ["fingerprint", "close"]


def test_an_interrupted_run_is_stored_with_what_it_measured(store_path) -> None:
    executor = Scripted(_valid(), then="interrupt")
    with Store.open(store_path) as store:
        outcome = conduct(executor, lambda: store, RunRequest())
        assert outcome is not None
        stored = store.load_run(outcome.run_id)
    assert executor.calls[-2:] == ["interrupted", "close"]
    assert outcome.interrupted and stored.record.status == RUN_INTERRUPTED
    assert [m.case.benchmark for m in stored.measurements] == ["ok"]


def test_the_executor_may_give_the_run_its_status(store_path) -> None:
    with Store.open(store_path) as store:
        outcome = conduct(Scripted(_valid(), then="status"), lambda: store, RunRequest())
        assert outcome is not None
        assert store.load_run(outcome.run_id).record.status == RUN_FAILED


def test_a_process_that_does_not_store_runs_its_part_and_opens_no_store() -> None:
    executor = Scripted(_valid(), stores=False)

    def no_store() -> Store:
        raise AssertionError("only the process that stores opens the store")

    assert conduct(executor, no_store, RunRequest()) is None
    assert executor.calls == ["fingerprint", "plan", "execute unrecorded", "close"]
