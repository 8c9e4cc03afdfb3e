"""The one run lifecycle (begin, record each case, finish) and the worker's typed protocol."""

from __future__ import annotations

import pytest

from accelbench.core.case import Case
from accelbench.core.device import DeviceInfo
from accelbench.core.names import RUN_COMPLETE, RUN_FAILED, RUN_INTERRUPTED
from accelbench.env.fingerprint import Fingerprint
from accelbench.errors import EXIT_CASE_FAILED, EXIT_DEVICE, EXIT_INTERNAL, EXIT_OK
from accelbench.runner import messages
from accelbench.runner.recorder import RunRecorder
from accelbench.runner.worker import answer
from accelbench.store import Store
from fakes import stored_measurement


class Recording:
    def __init__(self) -> None:
        self.events: list[tuple[object, ...]] = []

    def planned(self, cases, fingerprint, run_id) -> None:
        self.events.append(("planned", len(cases), run_id))

    def started(self, index, planned) -> None:
        self.events.append(("started", index))

    def process_started(self, index, planned, process, processes, budget_s) -> None:
        self.events.append(("process started", index, process))

    def process_done(self, index, process, processes, measurement) -> None:
        self.events.append(("process done", index, process))

    def finished(self, index, measurement) -> None:
        self.events.append(("finished", index, measurement.status))


def fingerprint() -> Fingerprint:
    device = DeviceInfo(type="cpu", index=None, name="Test CPU", platform="cpu")
    return Fingerprint(device=device, data={"devices": {"count": 1}})


def case(name: str) -> Case:
    return Case.make(name, "v", "micro", {"n": 1}, "cpu")


def test_each_case_is_stored_before_the_listener_hears_of_it(store_path) -> None:
    listener = Recording()
    with Store.open(store_path) as store:
        recorder = RunRecorder(store, fingerprint(), "quick", ["run"], listener)
        recorder.planned([])
        assert store.load_run(recorder.run_id).record.status == "running"

        class Checking(Recording):
            def finished(self, index, measurement) -> None:
                stored = store.load_run(recorder.run_id).measurements
                assert stored[-1] == measurement  # committed first
                super().finished(index, measurement)

        recorder.listener = Checking()
        recorder.record(0, stored_measurement(case("a"), samples=(1.0,)))
        recorder.record(1, stored_measurement(case("b"), "failed", reason="wrong"))
        outcome = recorder.finish()
        again = recorder.finish(RUN_COMPLETE)  # finishing twice changes nothing
        run = store.load_run(recorder.run_id)
    assert outcome is again and outcome.status == RUN_FAILED == run.record.status
    assert outcome.exit_code == EXIT_CASE_FAILED
    assert (run.record.n_ok, run.record.n_failed, run.record.suite) == (1, 1, "quick")
    assert run.record.argv == ("run",) and run.fingerprint["device"]["name"] == "Test CPU"
    assert listener.events == [("planned", 0, recorder.run_id)]
    assert isinstance(recorder.listener, Checking)
    assert recorder.listener.events == [("finished", 0, "ok"), ("finished", 1, "failed")]


def test_an_interrupted_run_says_so_and_keeps_its_cases(store_path) -> None:
    with Store.open(store_path) as store:
        recorder = RunRecorder(store, fingerprint(), None, [])
        recorder.record(0, stored_measurement(case("a"), samples=(1.0,)))
        recorder.interrupt()
        outcome = recorder.finish()
        run = store.load_run("latest")
    assert outcome.status == RUN_INTERRUPTED == run.record.status
    assert len(run.measurements) == 1


def test_a_clean_run_is_complete(store_path) -> None:
    with Store.open(store_path) as store:
        recorder = RunRecorder(store, fingerprint(), None, [])
        recorder.record(0, stored_measurement(case("a"), samples=(1.0,)))
        assert recorder.finish().exit_code == EXIT_OK
        assert store.load_run("latest").record.status == RUN_COMPLETE


def test_the_worker_answers_typed_requests() -> None:
    reply = answer(messages.ReadFingerprint("cuda:7"))
    assert isinstance(reply, messages.Refused) and reply.exit_code == EXIT_DEVICE
    reply = answer(messages.ReadFingerprint("cpu"))
    assert isinstance(reply, messages.FingerprintRead)
    assert Fingerprint.from_dict(reply.fingerprint).device.type == "cpu"
    strange = answer(object())  # type: ignore[arg-type]
    assert isinstance(strange, messages.Refused) and strange.exit_code == EXIT_INTERNAL


@pytest.mark.parametrize("message", [messages.ReadFingerprint("cpu"), messages.Stop()])
def test_messages_cross_a_process_boundary(message) -> None:
    import pickle

    assert pickle.loads(pickle.dumps(message)) == message
