"""`accelbench run` as a process: stopped by SIGTERM, or killed outright, it leaves no
process behind it, and no folder after the next start; what it stored stays readable.

Every process of a run under test inherits a marker in its environment, so the tests
find all of them (workers, torchrun, ranks) in /proc whatever their parent.
"""

import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from accelbench.errors import EXIT_TERMINATED
from accelbench.runner.lifeline import FOLDER_PREFIX, running
from accelbench.store import Store

HERE = Path(__file__).parent
MARK = "ACCELBENCH_TEST_RUN"
DEADLINE_S = 30.0  # a few seconds normally; generous for a loaded machine
JOB_DEADLINE_S = 120.0  # torchrun gives its ranks time to stop before it kills them
START_DEADLINE_S = 300.0  # torch imports, torchrun jobs start

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")]

# `accelbench run` with the suite's cases measured in one process each, so that a case
# is stored as soon as it is measured, not after its last round.
ONE_ROUND_RUN = """
import dataclasses, sys
import accelbench.runner.plan as plan
real = plan.load_suite
plan.load_suite = lambda name, registry=None: dataclasses.replace(
    real(name, registry), timing={**real(name, registry).timing, "processes": 1})
from accelbench.cli.main import main
sys.exit(main(sys.argv[1:]))
"""
# The same with the sample benchmarks, which misbehave on purpose.
SAMPLES_RUN = """
import accelbench.benchmarks
from sample_benches import SAMPLE_REGISTRY
accelbench.benchmarks.REGISTRY = SAMPLE_REGISTRY
""" + ONE_ROUND_RUN


def _start(argv: list[str], tmp_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    mark = uuid.uuid4().hex
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(exist_ok=True)
    env = {**os.environ, MARK: mark, "TMPDIR": str(tmpdir),
           "SAMPLE_HANG_FILE": str(tmp_path / "hanging"),
           "PYTHONPATH": os.pathsep.join(filter(None, (str(HERE), os.environ.get("PYTHONPATH"))))}
    process = subprocess.Popen([sys.executable, *argv], env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return process, mark


def _marked(mark: str) -> dict[int, str]:
    """The running processes that carry `mark`, with their command lines."""
    needle = f"{MARK}={mark}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if needle in environ.split(b"\0") and running(int(entry.name)):
            found[int(entry.name)] = cmdline
    return found


def _stored(store: Path) -> tuple[list[str], int] | None:
    """The runs' statuses and the count of measurements, read without writing."""
    if not store.exists():
        return None
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5) as db:
            statuses = [row[0] for row in db.execute("SELECT status FROM runs")]
            [(count,)] = db.execute("SELECT count(*) FROM measurements")
        db.close()
    except sqlite3.Error:
        return None
    return statuses, count


def _wait_until(condition, deadline_s: float, process: subprocess.Popen[bytes] | None = None):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if process is not None and process.poll() is not None:
            assert process.stderr is not None
            pytest.fail(f"the run ended first ({process.returncode}): "
                        f"{process.stderr.read().decode()[-3000:]}")
        time.sleep(0.2)
    return condition()


def _measured(store: Path, at_least: int = 1):
    def check():
        stored = _stored(store)
        return stored if stored and stored[1] >= at_least else None
    return check


def _samples_run(tmp_path: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    """A run that has stored one case and hangs in the second (its worker with it)."""
    store = tmp_path / "results.sqlite"
    process, mark = _start(["-c", SAMPLES_RUN, "run", "--bench", "ok", "hangs_announced",
                            "-p", "n=10", "--device", "cpu", "--max-time", "0.05",
                            "--no-report", "--store", str(store)], tmp_path)
    assert _wait_until(_measured(store), START_DEADLINE_S, process)
    assert _wait_until((tmp_path / "hanging").exists, START_DEADLINE_S, process)
    return process, mark, store


def test_sigterm_ends_the_run_as_interrupted_with_143_and_keeps_what_was_measured(tmp_path):
    process, mark, store = _samples_run(tmp_path)
    with process:
        assert any("multiprocessing" in cmd for cmd in _marked(mark).values())  # the worker
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=DEADLINE_S) == EXIT_TERMINATED
        assert process.stderr is not None
        assert "accelbench: error" not in process.stderr.read().decode()
    assert _wait_until(lambda: not _marked(mark), DEADLINE_S), _marked(mark)
    with Store.open(store, create=False) as opened:
        [record] = opened.list_runs()
        stored = opened.load_run(record.id)
    assert record.status == "interrupted"
    assert [(m.case.benchmark, m.status) for m in stored.measurements] == [("ok", "ok")]


def test_a_worker_does_not_outlive_a_killed_run(tmp_path):
    process, mark, store = _samples_run(tmp_path)
    with process:
        workers = [pid for pid, cmd in _marked(mark).items() if "multiprocessing" in cmd]
        assert workers
        process.kill()
        process.wait()
    # Measuring `hangs`, the worker would sleep for an hour.
    assert _wait_until(lambda: not _marked(mark), DEADLINE_S), _marked(mark)
    assert _stored(store) == (["running"], 1)


def test_ranks_of_a_killed_run_end_with_it_and_their_folder_goes_at_the_next_start(tmp_path):
    store = tmp_path / "results.sqlite"
    # Each case sampled for its whole 10 s: the job has the sweep's four other cases to
    # measure when the run is killed after the first, longer than the deadline.
    run = ["-c", ONE_ROUND_RUN, "run", "--bench", "collectives", "--nproc-per-node", "2",
           "--oversubscribe", "--device", "cpu", "--max-time", "10", "--target-ci", "0.001",
           "--no-report", "--store", str(store)]
    process, mark = _start(run, tmp_path)
    with process:
        _wait_until(_measured(store), START_DEADLINE_S, process)
        job = [cmd for cmd in _marked(mark).values() if "accelbench.runner.ranks" in cmd]
        before = _stored(store)
        process.kill()
        process.wait()
    assert before is not None and before[1] >= 1
    # torchrun and its two ranks were measuring when the run was killed.
    assert len(job) == 3 and sum("torch.distributed.run" in cmd for cmd in job) == 1, job
    assert _wait_until(lambda: not _marked(mark), DEADLINE_S), _marked(mark)

    # What was stored before the kill reads fine; the run was never finished.
    with Store.open(store, create=False) as opened:
        [record] = opened.list_runs()
        measurements = opened.load_run(record.id).measurements
    assert record.status == "running"
    assert len(measurements) >= before[1]
    assert all(m.status == "ok" and m.stats is not None and m.stats.median > 0
               for m in measurements)

    left = list((tmp_path / "tmp").glob(f"{FOLDER_PREFIX}*"))
    assert left, "the killed run had no time to remove its folder"
    again, _ = _start(["-m", "accelbench", "run", "--bench", "launch", "--device", "cpu",
                       "--max-time", "0.05", "--no-report", "--store", str(store)], tmp_path)
    with again:
        assert again.stderr is not None
        assert again.wait(timeout=START_DEADLINE_S) == 0, again.stderr.read().decode()[-3000:]
    assert not any(folder.exists() for folder in left)


# A profile of collectives on two CPU ranks that runs for hours: every step before the
# profiler starts is a real all-reduce. --oversubscribe: a small or busy node must not
# refuse the two ranks.
LONG_PROFILE = ["-m", "accelbench", "profile", "collectives", "-p", "op=all-reduce",
                "-p", "bytes=16K", "--device", "cpu", "--nproc-per-node", "2",
                "--oversubscribe", "--wait", "100000000", "--warmup", "1", "--steps", "1"]


def _profile_job(tmp_path: Path) -> tuple[subprocess.Popen[bytes], str, dict[int, str]]:
    """A long profile whose torchrun and both ranks have started and loaded torch."""
    process, mark = _start([*LONG_PROFILE, "--store", str(tmp_path / "results.sqlite")],
                           tmp_path)

    def job():
        found = {pid: cmd for pid, cmd in _marked(mark).items() if pid != process.pid}
        ranks = [pid for pid, cmd in found.items() if "torch.distributed.run" not in cmd]
        if len(found) == 3 and len(ranks) == 2 and all(map(_loaded_torch, ranks)):
            return found
        return None

    found = _wait_until(job, START_DEADLINE_S, process)
    assert found, _marked(mark)
    return process, mark, found


def _loaded_torch(pid: int) -> bool:
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def test_a_killed_profile_leaves_neither_torchrun_nor_its_ranks(tmp_path):
    process, mark, job = _profile_job(tmp_path)
    with process:
        assert sum("torch.distributed.run" in cmd for cmd in job.values()) == 1, job
        # torchrun leads a session of its own, not the one of the process that started it.
        torchrun = next(pid for pid, cmd in job.items() if "torch.distributed.run" in cmd)
        assert os.getsid(torchrun) == torchrun != os.getsid(process.pid)
        process.kill()
        process.wait()
    assert _wait_until(lambda: not _marked(mark), JOB_DEADLINE_S), _marked(mark)


def test_sigterm_ends_a_profile_and_its_ranks_with_143(tmp_path):
    process, mark, _ = _profile_job(tmp_path)
    with process:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=JOB_DEADLINE_S) == EXIT_TERMINATED
    assert _wait_until(lambda: not _marked(mark), JOB_DEADLINE_S), _marked(mark)
