"""A side of `accelbench explain` run for real in a process of its own, by a fake
interpreter (a script): what it is handed, and what becomes of a side that hangs, fails
or answers nothing that reads."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from accelbench.core.case import Case
from accelbench.core.request import Stack
from accelbench.errors import EXIT_CASE_FAILED, EXIT_USAGE, UserError
from accelbench.profile.sides import Side, check_stack, installed_torch, run_profile
from accelbench.store import StoredRun, parse_location
from accelbench.store.records import RunRecord
from fakes import stored_measurement

CASE = Case.make("gemm", "v1", "micro", {"shape": 64, "dtype": "fp32"}, "cpu")


def _interpreter(tmp_path: Path, body: str) -> str:
    """An executable that runs `body` (Python) whatever it is asked."""
    path = tmp_path / "python"
    path.write_text(f"#!{sys.executable}\nimport json, os, sys, time\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _side(python: str | None, env: tuple[tuple[str, str], ...] = (),
          torch: str = "2.13.0+cpu") -> Side:
    record = RunRecord(id="run-1", started_at=1.0, finished_at=2.0, status="complete",
                       suite="quick", argv=("run",), device="cpu", generation_key="CPU",
                       host="h", accelbench_version="0", fingerprint_id="f", n_ok=1,
                       n_failed=0, n_skipped=0)
    run = StoredRun(record, {"torch": {"version": torch}}, (stored_measurement(CASE),))
    return Side("b", run, run.measurements[0], Stack(python, env), inherit=False)


ANSWER = """
with open(os.environ["SEEN"], "w") as f:
    json.dump({k: os.environ.get(k) for k in ("ACCELBENCH_STORE", "PGPASSWORD",
               "PYTHONPATH", "MKL_CBWR", "OMP_NUM_THREADS")} | {"argv": sys.argv[1:]}, f)
print(json.dumps({"run_id": "r9", "traces": ["/t/x.pt.trace.json.gz"], "status": "complete",
                  "problems": [], "measurement": {"status": "ok"}}))
"""


def test_a_side_gets_its_switches_the_store_and_this_accelbench(tmp_path, monkeypatch):
    seen = tmp_path / "seen.json"
    monkeypatch.setenv("SEEN", str(seen))
    monkeypatch.setenv("OMP_NUM_THREADS", "7")  # this shell's switch: not the run's
    python = _interpreter(tmp_path, ANSWER)
    url = "postgresql://bench:s3cret@db.example/results"
    done = run_profile(_side(python, (("MKL_CBWR", "COMPATIBLE"),)), tmp_path / "r.json",
                       parse_location(url), tmp_path, timeout_s=60)
    assert (done.run_id, done.status) == ("r9", "complete")
    got: dict[str, Any] = json.loads(seen.read_text())
    assert got["argv"] == ["-m", "accelbench", "profile", "--request",
                           str(tmp_path / "r.json"), "--json"]
    assert got["MKL_CBWR"] == "COMPATIBLE" and got["OMP_NUM_THREADS"] is None
    # The password reaches it in the environment, never on its command line or in the URL.
    assert got["PGPASSWORD"] == "s3cret" and "s3cret" not in got["ACCELBENCH_STORE"]
    link = Path(got["PYTHONPATH"].split(os.pathsep)[0]) / "accelbench"
    assert link.is_symlink() and (link / "profile" / "sides.py").is_file()


def test_a_side_that_hangs_is_stopped_at_its_deadline(tmp_path):
    python = _interpreter(tmp_path, "time.sleep(120)")
    started = time.monotonic()
    with pytest.raises(UserError, match="side B timed out after 1 s") as e:
        run_profile(_side(python), tmp_path / "r.json", parse_location(tmp_path / "s.db"),
                    tmp_path, timeout_s=1)
    assert e.value.exit_code == EXIT_CASE_FAILED and time.monotonic() - started < 60


@pytest.mark.parametrize(("body", "said"), [
    ("sys.exit('accelbench: error: no run matches')", "failed: accelbench: error: no run"),
    ("print('not json')", "failed: it printed no result that reads"),
    ("sys.exit(3)", "failed: exit status 3"),
])
def test_a_side_that_fails_says_why_in_one_line(tmp_path, body, said):
    with pytest.raises(UserError, match=said) as e:
        run_profile(_side(_interpreter(tmp_path, body)), tmp_path / "r.json",
                    parse_location(tmp_path / "s.db"), tmp_path, timeout_s=60)
    assert e.value.exit_code == EXIT_CASE_FAILED


def test_a_failed_case_under_the_profiler_is_a_problem_of_the_side(tmp_path):
    body = ("print(json.dumps({'run_id': 'r', 'traces': [], 'status': 'failed', "
            "'measurement': {'status': 'failed', 'reason': 'out of memory'}}))")
    done = run_profile(_side(_interpreter(tmp_path, body)), tmp_path / "r.json",
                       parse_location(tmp_path / "s.db"), tmp_path, timeout_s=60)
    assert done.problems == ("the case failed: out of memory",)


def test_an_interpreter_with_another_pytorch_is_refused(tmp_path):
    python = _interpreter(tmp_path, "print('2.14.1+rocm7.0')")
    assert installed_torch(python) == "2.14.1+rocm7.0"
    with pytest.raises(UserError, match=r"PyTorch 2\.13\.0\+cpu, but .* has PyTorch "
                                        r"2\.14\.1\+rocm7\.0: give --b") as e:
        check_stack(_side(python), "--b")
    assert e.value.exit_code == EXIT_USAGE
    check_stack(_side(python, torch="2.14.1+rocm7.0"), "--b")  # the same: accepted
    no_torch = _interpreter(tmp_path, "print('')")
    with pytest.raises(UserError, match="has no PyTorch"):
        check_stack(_side(no_torch), "--b")
