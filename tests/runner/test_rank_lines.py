"""How the supervisor of a distributed job reads its ranks' lines, in any order they arrive.

The ranks append to one file without any order between them: a rank's report of its own
failure may land before rank 0's `start` of that case, or even before rank 0's `result`
of the case before. None of that may lose the failure or make it wait on a clock.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sample_benches import DIST_REGISTRY

from accelbench.core.case import Case
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import Measurement, not_measured
from accelbench.core.timing import TimingPolicy
from accelbench.runner.launcher import (
    Failed,
    Finished,
    JobProgress,
    RankExit,
    RankGroup,
    Started,
    job_exit_reason,
    rank_exits,
)
from accelbench.runner.plan import PlannedCase
from accelbench.runner.ranks import running

CPU = DeviceInfo(type="cpu", index=None, platform="cpu", name="Test CPU")


def start(i):
    return {"event": "start", "index": i}


def result(i, status="ok", reason=None):
    return {"event": "result", "index": i, "measurement": {"status": status, "reason": reason}}


def rank_failed(i, rank, reason):
    return {"event": "rank_failed", "index": i, "rank": rank, "reason": reason,
            "measurement": {"status": "failed", "reason": reason, "rank": rank}}


def failure(i, rank, reason):
    return Failed(i, f"rank {rank}: {reason}", rank_failed(i, rank, reason)["measurement"])


def test_a_failure_reported_before_the_start_of_its_case_fails_the_case_at_once():
    progress = JobProgress(3)
    events = progress.feed([rank_failed(0, 1, "only rank 1 saw this")])
    assert events == [Started(0), failure(0, 1, "only rank 1 saw this")]
    assert progress.ended and progress.settled == 1
    # Rank 0's start, arriving later, neither revives the case nor clears its failure.
    assert progress.feed([start(0)]) == []
    assert progress.settled == 1


def test_the_same_order_within_one_read():
    progress = JobProgress(2)
    events = progress.feed([rank_failed(0, 1, "boom"), start(0), result(0, "failed", "x")])
    assert events == [Started(0), failure(0, 1, "boom")]
    assert progress.ended and progress.settled == 1


def _ended(progress: JobProgress) -> bool:
    """`progress.ended`, read through a call: mypy would keep the attribute narrowed by an
    assert across the later `feed`, which changes it."""
    return progress.ended


def test_a_failure_that_overtakes_the_result_of_the_case_before_waits_for_it():
    progress = JobProgress(3)
    assert progress.feed([start(0)]) == [Started(0)]
    # Rank 1 is through case 0 and has already failed case 1; rank 0's lines follow.
    assert progress.feed([rank_failed(1, 1, "wrong sum")]) == []
    assert not _ended(progress)
    events = progress.feed([result(0), start(1)])
    assert events == [Finished(0, result(0)["measurement"]), Started(1),
                      failure(1, 1, "wrong sum")]
    assert progress.ended and progress.settled == 2


def test_the_first_failure_of_a_case_is_the_one_recorded():
    progress = JobProgress(1)
    progress.feed([start(0)])
    events = progress.feed([rank_failed(0, 1, "first"), rank_failed(0, 0, "second")])
    assert events == [failure(0, 1, "first")]


def test_rank_0_reports_its_own_failure_like_any_rank():
    progress = JobProgress(2)
    events = progress.feed([start(0), rank_failed(0, 0, "RuntimeError: boom")])
    assert events == [Started(0), failure(0, 0, "RuntimeError: boom")]
    assert progress.ended


def test_a_job_without_failures_settles_every_case_in_order():
    progress = JobProgress(2)
    events = progress.feed([start(0), result(0)]) + progress.feed([start(1), result(1)])
    assert events == [Started(0), Finished(0, result(0)["measurement"]),
                      Started(1), Finished(1, result(1)["measurement"])]
    assert progress.done and not progress.ended and progress.settled == 2


def test_lines_about_settled_cases_change_nothing():
    progress = JobProgress(2)
    progress.feed([start(0), result(0)])
    assert progress.feed([rank_failed(0, 1, "late")]) == []
    assert not progress.ended and progress.settled == 1


def test_a_job_that_ends_otherwise_fails_the_case_it_was_in():
    progress = JobProgress(3)
    progress.feed([start(0), result(0)])
    assert progress.fail("ranks exited with code 1") == [
        Started(1), Failed(1, "ranks exited with code 1")]
    assert progress.ended and progress.settled == 2
    never_started = JobProgress(1)
    assert never_started.fail("timed out") == [Started(0), Failed(0, "timed out")]


def test_failures_that_echo_a_dead_rank_are_left_to_the_job_s_exit():
    progress = JobProgress(2)
    assert progress.feed([start(0)]) == [Started(0)]
    # Rank 1 had died when rank 0 failed: rank 0's broken collective is no failure of its own.
    echo = {**rank_failed(0, 0, "RuntimeError: Connection closed by peer"), "lost_peers": [1]}
    assert progress.feed([echo]) == []
    assert not progress.ended
    assert progress.fail("ranks exited with code 1") == [Failed(0, "ranks exited with code 1")]
    # A report from before the death counts, whenever it is read.
    progress = JobProgress(2)
    events = progress.feed([start(0), {**rank_failed(0, 1, "mine"), "lost_peers": []}, echo])
    assert events == [Started(0), failure(0, 1, "mine")]


def test_a_process_is_running_until_it_begins_to_exit():
    assert running(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not yet reaped
    assert not running(child.pid)
    child.wait()
    assert not running(child.pid)


# A stand-in for torchrun and its ranks: writes given lines in the given order, then
# waits forever, as ranks stuck in a collective would. Only ending the job ends it.
FAKE_RANKS = textwrap.dedent("""
    import json, sys, time
    from accelbench.core.measurement import Measurement, not_measured
    from accelbench.core.timing import Timing
    from accelbench.runner.rank_job import read_job
    job, results = sys.argv[1:]
    cases = read_job(open(job).read()).cases
    def line(record):
        with open(results, "a") as f:
            f.write(json.dumps(record) + "\\n")
    if len(cases) == 3:  # the first job: case 0 is measured, rank 1 fails case 1 early
        failed = not_measured(cases[1].case, "failed", "only rank 1 saw this", 1.0, 0.5,
                              {"traceback": "rank 1's"})
        line({"event": "start", "index": 0})
        line({"event": "rank_failed", "index": 1, "rank": 1, "reason": failed.reason,
              "measurement": failed.to_dict()})
        line({"event": "result", "index": 0,
              "measurement": Measurement(cases[0].case, "ok",
                                         timings=(Timing((1.0,), 1, 0, "converged"),)
                                         ).to_dict()})
        line({"event": "start", "index": 1})
        time.sleep(3600)
    for i, planned in enumerate(cases):  # the job started again for the cases left
        line({"event": "start", "index": i})
        line({"event": "result", "index": i,
              "measurement": Measurement(planned.case, "ok",
                                         timings=(Timing((2.0,), 1, 0, "converged"),)
                                         ).to_dict()})
""")


class FakeRanks(RankGroup):
    def command(self, job, results):
        return [sys.executable, "-c", FAKE_RANKS, str(job), str(results)]


@pytest.mark.timeout(120)
def test_the_supervisor_ends_the_job_on_a_rank_failure_and_runs_the_rest(monkeypatch):
    # The ranks find the cases' benchmarks in their registry, by its locator.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, (str(Path(__file__).parent), os.environ.get("PYTHONPATH")))))
    bench = DIST_REGISTRY.get("dist_fails")
    cases = [PlannedCase(bench, Case.make(bench.name, bench.version, bench.family, {"i": i},
                                          "cpu"), {}, 2) for i in range(3)]
    started: list[int] = []
    results: dict[int, Measurement] = {}
    # Were the job left to its timeout, the test would run into its own.
    FakeRanks(2, "gloo", DIST_REGISTRY).run(cases, CPU, TimingPolicy(), lambda planned: 3600.0,
                             started.append, results.__setitem__)
    assert started == [0, 1, 2]
    assert [results[i].status for i in range(3)] == ["ok", "failed", "ok"]
    assert results[0].samples == (1.0,) and results[2].samples == (2.0,)
    failed = results[1]
    assert failed.reason == "rank 1: only rank 1 saw this"
    assert failed.case == cases[1].case
    assert failed.details == {"traceback": "rank 1's"}  # the failing rank's own account
    assert isinstance(failed, Measurement) and failed.figures == ()


def test_a_failure_without_the_rank_s_measurement_is_timed_by_the_supervisor():
    bench = DIST_REGISTRY.get("dist_fails")
    planned = PlannedCase(bench, Case.make(bench.name, bench.version, bench.family, {}, "cpu"),
                          {}, 2)
    m = RankGroup._failed(planned, Failed(0, "rank 1: boom"), started_at=100.0)
    expected = not_measured(planned.case, "failed", "rank 1: boom", 100.0, m.duration_s)
    assert m == expected and m.duration_s > 0


def _summary(root: tuple[int, int], *others: tuple[int, int]) -> str:
    """torchrun's summary of a failed job (torch 2.x), as it ends the ranks' log."""
    def entry(number: int, rank: int, code: int) -> str:
        return (f"[{number}]:\n  time      : 2026-01-01_10:00:00\n  host      : localhost\n"
                f"  rank      : {rank} (local_rank: {rank})\n"
                f"  exitcode  : {code} (pid: 4242)\n  error_file: <N/A>\n"
                "  traceback : To enable traceback see: https://pytorch.org/docs/\n")
    failures = "".join(entry(i + 1, *o) for i, o in enumerate(others)) or "  <NO_OTHER_FAILURES>\n"
    return ("Traceback (most recent call last):\n  ...\nChildFailedError: \n" + "=" * 40 +
            "\naccelbench.runner.ranks FAILED\n" + "-" * 40 + "\nFailures:\n" + failures +
            "-" * 40 + "\nRoot Cause (first observed failure):\n" + entry(0, *root) + "=" * 40)


def test_the_rank_that_ended_the_job_is_named_with_how_it_ended(tmp_path):
    log = tmp_path / "ranks.log"
    cases = [
        (_summary((1, -9), (0, -15)), set(), "rank 1 was killed by SIGKILL (signal 9)"),
        (_summary((1, 3), (0, -15)), set(), "rank 1 exited with code 3"),
        (_summary((2, -6)), set(), "rank 2 was killed by SIGABRT (signal 6)"),
        # Torchrun saw rank 0 first (to the second), but rank 0 only failed because
        # rank 1 had died, and said so.
        (_summary((0, 1), (1, 3)), {0}, "rank 1 exited with code 3"),
        # Every rank stopped by SIGTERM: whoever torchrun saw first.
        (_summary((0, -15), (1, -15)), set(), "rank 0 was killed by SIGTERM (signal 15)"),
    ]
    for text, echoing, reason in cases:
        log.write_text(text)
        assert job_exit_reason(1, log, echoing) == reason
    assert rank_exits(_summary((1, 3), (0, -15), (2, 1))) == [
        RankExit(1, 3), RankExit(0, -15), RankExit(2, 1)]
    log.write_text("RuntimeError: the store could not be reached\nbye\n")
    assert job_exit_reason(1, log) == (
        "ranks exited with code 1: RuntimeError: the store could not be reached")
