"""A run survives every way a case can go wrong, and stores everything it measured."""

import pytest
from sample_benches import SAMPLE_REGISTRY

from accelbench.core.request import RunRequest
from accelbench.errors import EXIT_CASE_FAILED, EXIT_DEVICE, EXIT_OK, UserError
from accelbench.runner.plan import validate
from accelbench.runner.session import run_session
from accelbench.store import Store

pytestmark = pytest.mark.slow

# One process per case: rounds of processes are tested in tests/runner/test_interleaving.py.
FAST = {"max_time": 0.05, "warmup_time": 0.0, "processes": 1}


def test_failures_crashes_and_hangs_are_recorded_and_the_run_goes_on(store_path):
    order = ("ok", "fails", "errors", "oom", "skips", "crashes", "hangs", "ok")
    request = RunRequest(benches=order[:-1], timing=FAST)
    with Store.open(store_path) as store:
        outcome = run_session(validate(request, SAMPLE_REGISTRY), store, argv=["run"])
        stored = store.load_run(outcome.run_id)

    by_name = {m.case.benchmark: m for m in stored.measurements}
    assert [m.case.benchmark for m in stored.measurements] == list(order[:-1])
    assert by_name["ok"].status == "ok"
    primary = by_name["ok"].primary
    assert by_name["ok"].samples and primary is not None and primary.unit == "item/s"
    assert by_name["fails"].reason == "wrong result: deliberately"
    assert by_name["errors"].reason == "RuntimeError: boom"
    assert "traceback" in by_name["errors"].details
    oom = by_name["oom"].reason
    assert oom is not None and oom.startswith("out of memory")
    assert by_name["skips"].status == "skipped"
    crashes, hangs = by_name["crashes"], by_name["hangs"]
    assert crashes.status == "failed" and crashes.reason is not None
    assert "crashed (SIGABRT)" in crashes.reason
    assert hangs.status == "failed" and hangs.reason is not None
    assert "timed out after 3 s" in hangs.reason
    assert outcome.exit_code == EXIT_CASE_FAILED
    assert stored.record.status == "failed"


def test_a_clean_run_exits_zero_and_is_complete(store_path):
    request = RunRequest(benches=("ok",), overrides={"n": ("10", "100")}, timing=FAST)
    with Store.open(store_path) as store:
        outcome = run_session(validate(request, SAMPLE_REGISTRY), store)
        record = store.load_run("latest").record
    assert outcome.exit_code == EXIT_OK
    assert [m.case.param_dict["n"] for m in outcome.measurements] == [10, 100]
    assert record.status == "complete" and record.n_ok == 2


def test_a_missing_device_is_refused_before_anything_is_stored(store_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with Store.open(store_path) as store:
        with pytest.raises(UserError) as info:
            run_session(validate(RunRequest(benches=("ok",), device="cuda", timing=FAST),
                                 SAMPLE_REGISTRY), store)
        assert store.list_runs() == []
    assert info.value.exit_code == EXIT_DEVICE


def test_ctrl_c_keeps_what_was_measured_and_marks_the_run_interrupted(store_path):
    from accelbench.errors import EXIT_INTERRUPTED
    from accelbench.runner.session import SilentListener

    class StopAfterFirst(SilentListener):
        def finished(self, index, measurement):
            raise KeyboardInterrupt

    request = RunRequest(benches=("ok",), overrides={"n": ("10", "20", "30")}, timing=FAST)
    with Store.open(store_path) as store:
        outcome = run_session(validate(request, SAMPLE_REGISTRY), store, listener=StopAfterFirst())
        stored = store.load_run(outcome.run_id)
    assert outcome.exit_code == EXIT_INTERRUPTED
    assert stored.record.status == "interrupted"
    assert [m.case.param_dict["n"] for m in stored.measurements] == [10]


def test_cases_with_different_worker_keys_never_share_a_process(store_path):
    from accelbench.runner import plan, session

    order = [("keyed_pid", "a"), ("keyed_pid", "a"), ("keyed_pid", "b"), ("pid", None),
             ("keyed_pid", "a")]
    original_expand = plan.expand

    def ordered_expand(*args, **kwargs):
        planned = {(p.benchmark.name, p.params.get("mode")): p
                   for p in original_expand(*args, **kwargs)}
        return [planned[item] for item in order]

    request = RunRequest(benches=("keyed_pid", "pid"), overrides={"mode": ("a", "b")},
                      timing=FAST)
    with Store.open(store_path) as store, pytest.MonkeyPatch.context() as mp:
        mp.setattr(session, "expand", ordered_expand)
        outcome = session.run_session(validate(request, SAMPLE_REGISTRY), store)
    pids = [m.details["pid"] for m in outcome.measurements]
    assert pids[0] == pids[1]  # same key: same worker
    assert pids[2] != pids[1]  # another key: a fresh worker
    assert pids[3] == pids[2]  # no key: any worker will do
    assert pids[4] not in (pids[2], pids[0])  # back to "a": fresh again
