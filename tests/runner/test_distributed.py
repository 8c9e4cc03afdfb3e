"""Distributed cases on CPU ranks (gloo, torchrun): in step, stored once, failures contained."""

import os
from pathlib import Path

import pytest
from sample_benches import DIST_REGISTRY

from accelbench.core.case import Case
from accelbench.core.context import DistInfo
from accelbench.core.request import RunRequest
from accelbench.errors import EXIT_CASE_FAILED, UserError
from accelbench.runner.distributed import check_backend, info_from_env, launched_by_torchrun
from accelbench.runner.plan import validate
from accelbench.runner.ranks import combine
from accelbench.runner.session import run_session
from accelbench.store import Store
from fakes import stored_measurement

# One process per case: rounds of processes are tested in tests/runner/test_interleaving.py.
FAST = {"max_time": 0.2, "warmup_time": 0.0, "processes": 1}


@pytest.fixture
def importable_samples(monkeypatch):
    """torchrun's ranks are new interpreters: they find the sample benchmarks by path."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, (str(Path(__file__).parent), os.environ.get("PYTHONPATH")))))


@pytest.mark.slow
def test_ranks_run_in_step_and_failures_stay_with_their_case(store_path, importable_samples):
    request = RunRequest(
        benches=("ok", "dist_sum", "dist_dies", "dist_hangs", "dist_fails"),
        overrides={"n": ("256",)}, timing=FAST, nproc_per_node=2,
    )
    with Store.open(store_path) as store:
        outcome = run_session(validate(request, DIST_REGISTRY), store)
        stored = store.load_run(outcome.run_id)
    by_name = {m.case.benchmark: m for m in stored.measurements}
    assert list(by_name) == ["ok", "dist_sum", "dist_dies", "dist_hangs", "dist_fails"]

    summed = by_name["dist_sum"]
    assert summed.status == "ok", summed.reason
    assert summed.details["dist"] == {"rank": 0, "world_size": 2, "local_rank": 0,
                                      "local_world_size": 2, "nodes": 1, "backend": "gloo"}
    assert summed.case.param_dict["world_size"] == 2
    assert summed.case.param_dict["backend"] == "gloo"
    assert "world_size" not in by_name["ok"].case.param_dict

    assert by_name["dist_dies"].status == "failed"
    assert by_name["dist_dies"].reason == "rank 1 exited with code 3"
    hangs = by_name["dist_hangs"]
    assert hangs.status == "failed" and hangs.reason is not None
    assert "timed out after 8 s" in hangs.reason
    # After a dead rank and a hang, a fresh job still runs the remaining case.
    assert by_name["dist_fails"].status == "failed"
    assert by_name["dist_fails"].reason == "rank 1: only rank 1 saw this"
    assert outcome.exit_code == EXIT_CASE_FAILED


def test_combine_fails_the_case_when_any_rank_failed():
    info = DistInfo(0, 4, 0, 4, "gloo")
    case = Case.make("x", "v", "collective", {}, "cpu")
    ok = stored_measurement(case, "ok", samples=(1.0,), number=1)
    assert combine(ok, [("ok", None)] * 4, info).status == "ok"
    bad = combine(ok, [("ok", None), ("ok", None), ("failed", "boom"), ("ok", None)], info)
    assert bad.status == "failed" and bad.reason == "rank 2: boom"
    assert bad.details["dist"]["world_size"] == 4


def test_torchrun_environment_is_read():
    env = {"RANK": "3", "WORLD_SIZE": "16", "LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "8"}
    assert launched_by_torchrun(env) and not launched_by_torchrun({})
    info = info_from_env("nccl", env)
    assert (info.rank, info.world_size, info.nodes) == (3, 16, 2)


def test_backend_choice_and_validation():
    assert check_backend(None, "cuda") == "nccl"  # RCCL on ROCm builds
    assert check_backend(None, "cpu") == "gloo"
    with pytest.raises(UserError, match="needs a GPU"):
        check_backend("nccl", "cpu")
    with pytest.raises(UserError, match="unknown backend"):
        check_backend("ucc2", "cpu")
    with pytest.raises(UserError, match="at least 1"):
        validate(RunRequest(benches=("ok",), nproc_per_node=0), DIST_REGISTRY)


@pytest.mark.slow
def test_user_launched_torchrun_measures_on_every_rank_and_stores_once(tmp_path):
    import json
    import subprocess
    import sys

    store = tmp_path / "ranks.sqlite"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node=2", "-m", "accelbench", "run", "--bench", "launch",
               "--device", "cpu", "--store", str(store), "--max-time", "0.1", "--json",
               "--no-report"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads(result.stdout)  # rank 0 alone printed
    [measurement] = data["measurements"]
    assert measurement["status"] == "ok"
    assert measurement["details"]["dist"]["world_size"] == 2
    with Store.open(store, create=False) as opened:
        assert len(opened.list_runs()) == 1


def test_native_output_of_a_rank_goes_to_stderr_and_python_keeps_stdout() -> None:
    """Gloo prints to file descriptor 1 when a group is made; --json output must stay
    parseable under a user's torchrun."""
    import subprocess
    import sys

    code = ("import os; from accelbench.runner.distributed import stdout_for_python_only; "
            "stdout_for_python_only(); os.write(1, b'[Gloo] Rank 0 is connected\\n'); "
            "print('{\"ok\": true}')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == '{"ok": true}\n'
    assert "[Gloo] Rank 0 is connected" in result.stderr
