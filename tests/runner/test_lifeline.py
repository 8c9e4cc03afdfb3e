"""Processes end with the accelbench that started them; their folders do not outlive it."""

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from accelbench.errors import Terminated
from accelbench.runner.lifeline import (
    FOLDER_PREFIX,
    OWNER_ENV,
    OWNER_FILE,
    OWNER_START_ENV,
    owned_folder,
    owner_environment,
    remove_orphaned_folders,
    running,
    start_time,
    terminate_as_interrupt,
    watch_owner,
)

DEADLINE_S = 60.0
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


def _wait_until(condition, deadline_s=DEADLINE_S):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def _dead_pid():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _folder(parent, name, marker=None):
    path = parent / name
    path.mkdir()
    if marker is not None:
        (path / OWNER_FILE).write_text(marker)
    return path


def test_only_folders_of_owners_gone_are_removed(tmp_path):
    dead, me, other = _dead_pid(), os.getpid(), os.getppid()
    orphan = _folder(tmp_path, f"{FOLDER_PREFIX}{dead}-a", f"{dead} 123\n")
    # The pid lives, but it is another process than the one that made the folder.
    reused = _folder(tmp_path, f"{FOLDER_PREFIX}{other}-b", f"{other} 1\n")
    live = _folder(tmp_path, f"{FOLDER_PREFIX}{me}-c", f"{me} {start_time(me)}\n")
    other_live = _folder(tmp_path, f"{FOLDER_PREFIX}{other}-e",
                         f"{other} {start_time(other)}\n")
    unmarked = _folder(tmp_path, f"{FOLDER_PREFIX}{dead}-d")
    foreign = _folder(tmp_path, f"other-{dead}", f"{dead} 123\n")
    garbled = _folder(tmp_path, f"{FOLDER_PREFIX}x", "not a pid\n")
    (tmp_path / f"{FOLDER_PREFIX}file").write_text(f"{dead}\n")

    removed = remove_orphaned_folders(tmp_path)

    if start_time(me):
        assert sorted(removed) == sorted([orphan, reused])
    else:  # without /proc: by pid only
        assert removed == [orphan]
    assert not orphan.exists()
    for kept in (live, other_live, unmarked, foreign, garbled, tmp_path / f"{FOLDER_PREFIX}file"):
        assert kept.exists(), kept


def test_an_owned_folder_is_marked_with_its_owner_and_removed_after(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    with owned_folder() as folder:
        assert folder.parent == tmp_path
        assert folder.name.startswith(f"{FOLDER_PREFIX}{os.getpid()}-")
        assert (folder / OWNER_FILE).read_text().split()[0] == str(os.getpid())
        assert remove_orphaned_folders(tmp_path) == []  # its owner lives
    assert not folder.exists()


def _sleeper():
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])


def test_the_owner_environment_names_this_process_by_pid_and_start_time():
    env = owner_environment({"KEEP": "1"})
    assert env["KEEP"] == "1"
    assert env[OWNER_ENV] == str(os.getpid())
    assert env[OWNER_START_ENV] == start_time(os.getpid())


@linux_only
def test_a_process_with_the_owners_pid_but_another_start_time_is_not_the_owner():
    gone = threading.Event()
    with _sleeper() as other:
        try:
            # As if the owner had died and its pid gone to this other process.
            watch_owner(other.pid, gone.set, interval_s=0.05, started="1")
            assert gone.wait(DEADLINE_S)
            assert running(other.pid)
        finally:
            other.kill()


@linux_only
def test_the_owner_is_watched_while_it_lives_and_seen_to_go():
    gone = threading.Event()
    with _sleeper() as owner:
        try:
            watch_owner(owner.pid, gone.set, interval_s=0.05,
                        started=start_time(owner.pid))
            assert not gone.wait(0.5)  # several looks: still the owner
            owner.kill()
            owner.wait()
            assert gone.wait(DEADLINE_S)
        finally:
            owner.kill()


# A process standing in for a rank: it watches its owner, then says its pid; with
# "helper", it starts a child (in its group) and says that pid too.
RANK = textwrap.dedent("""
    import os, subprocess, sys, time
    from accelbench.runner.lifeline import end_with_owner
    end_with_owner()
    pids = [os.getpid()]
    if sys.argv[1:] == ["helper"]:
        pids.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]).pid)
    # One write of the whole line: two ranks share the pipe, and a line written in parts
    # could be split by the other's.
    os.write(1, (" ".join(map(str, pids)) + "\\n").encode())
    time.sleep(600)
""")

# A process standing in for torchrun as accelbench starts it (a session of its own, its
# owner named in the environment) but without a parent-death signal: one rank shares
# its group, as older torchruns start them; another leads a session of its own, as newer
# ones do, with a helper process in its group.
TORCHRUN = textwrap.dedent("""
    import subprocess, sys, time
    shared = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
    alone = subprocess.Popen([sys.executable, "-c", sys.argv[1], "helper"],
                             start_new_session=True)
    time.sleep(600)
""")

# The owner: it starts the job as the launcher does, says the job's pid, waits to die.
OWNER = textwrap.dedent("""
    import subprocess, sys, time
    from accelbench.runner.lifeline import owner_environment
    job = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]],
                           start_new_session=True, env=owner_environment())
    print(job.pid, flush=True)
    time.sleep(600)
""")


@linux_only
@pytest.mark.slow
def test_the_ranks_and_their_job_end_when_the_owner_dies():
    with subprocess.Popen([sys.executable, "-c", OWNER, TORCHRUN, RANK],
                          stdout=subprocess.PIPE, text=True) as owner:
        assert owner.stdout is not None
        pids: list[int] = []
        try:
            # torchrun's pid, then each rank's once it watches (with the helper's).
            lines = [owner.stdout.readline() for _ in range(3)]
            pids = [int(pid) for line in lines for pid in line.split()]
            assert len(set(pids)) == 4 and all(running(pid) for pid in pids)
            owner.kill()
            owner.wait()
            # torchrun has no parent-death signal here: the rank in its group ends it.
            for pid in pids:
                assert _wait_until(lambda pid=pid: not running(pid)), pid
        finally:
            owner.kill()
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


# A process in a session of its own, as cron, systemd or `setsid` start a script: it
# starts a rank sharing its group (a torchrun started without a session of its own puts
# its ranks there) and a sibling job in the same group (`cat`, which echoes a line).
# It says the rank's pid, then answers each line from the test with the sibling's echo:
# an answer after the rank has ended shows that both outlived it.
SCRIPT = textwrap.dedent("""
    import subprocess, sys
    rank = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE,
                            text=True)
    rank_pid = rank.stdout.readline().strip()
    sibling = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True)
    print(rank_pid, flush=True)
    for line in sys.stdin:
        sibling.stdin.write(line)
        sibling.stdin.flush()
        print(sibling.stdout.readline().strip(), flush=True)
""")


@linux_only
@pytest.mark.slow
def test_a_rank_whose_owner_dies_never_kills_a_group_it_shares_with_others():
    with _sleeper() as owner:
        env = {**os.environ, OWNER_ENV: str(owner.pid), OWNER_START_ENV: start_time(owner.pid)}
        with subprocess.Popen([sys.executable, "-c", SCRIPT, RANK], env=env,
                              start_new_session=True, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) as script:
            assert script.stdin is not None and script.stdout is not None
            try:
                rank = int(script.stdout.readline())
                assert os.getsid(script.pid) == os.getpgid(script.pid) == script.pid
                assert os.getpgid(rank) == script.pid
                owner.kill()
                owner.wait()
                assert _wait_until(lambda: not running(rank))
                script.stdin.write("still here\n")
                script.stdin.flush()
                assert script.stdout.readline() == "still here\n"
                assert running(script.pid)
            finally:
                owner.kill()
                with contextlib.suppress(OSError):
                    os.killpg(script.pid, signal.SIGKILL)


@linux_only
@pytest.mark.slow
def test_a_rank_ends_when_its_owners_pid_names_another_process():
    with _sleeper() as other:
        # The owner died before the rank started, and its pid went to `other`.
        env = {**os.environ, OWNER_ENV: str(other.pid), OWNER_START_ENV: "1"}
        with subprocess.Popen([sys.executable, "-c", RANK], env=env, start_new_session=True,
                              stdout=subprocess.PIPE, text=True) as rank:
            try:
                assert rank.wait(timeout=DEADLINE_S) == -signal.SIGKILL
                assert running(other.pid)
            finally:
                rank.kill()
                other.kill()


# A process standing in for accelbench: it starts a child the way the launcher starts
# torchrun, says the child's pid, and waits to be killed.
PARENT = textwrap.dedent("""
    import signal, subprocess, sys, time
    from accelbench.runner.lifeline import parent_death_preexec
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                             start_new_session=True,
                             preexec_fn=parent_death_preexec(signal.SIGTERM))
    print(child.pid, flush=True)
    time.sleep(600)
""")


@linux_only
@pytest.mark.slow
def test_the_parent_death_signal_reaches_the_child():
    with subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE,
                          text=True) as parent:
        assert parent.stdout is not None
        try:
            child = int(parent.stdout.readline())
            assert running(child)
            parent.kill()
            parent.wait()
            assert _wait_until(lambda: not running(child))
        finally:
            parent.kill()


def test_sigterm_is_raised_as_terminated_within_and_restored_after():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated), terminate_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        _wait_until(lambda: False)  # the handler raises within a few bytecodes
    assert signal.getsignal(signal.SIGTERM) == before
    assert issubclass(Terminated, KeyboardInterrupt)  # every Ctrl-C path handles it


def test_a_rank_exits_with_its_code_its_output_flushed_and_its_exit_handlers_run(tmp_path):
    marker = tmp_path / "left"
    script = (
        "import atexit, sys\n"
        "from accelbench.runner.lifeline import exit_rank\n"
        f"atexit.register(lambda: open({str(marker)!r}, 'w').write('left'))\n"
        "sys.stdout.write('the last line, unflushed')\n"
        "exit_rank(3)\n"
        "print('never')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 3
    assert done.stdout == "the last line, unflushed"
    assert marker.read_text() == "left"


def test_the_command_under_torchrun_ends_as_a_rank_does(tmp_path):
    environ = {**os.environ, "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}
    done = subprocess.run([sys.executable, "-m", "accelbench", "--version"], env=environ,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("accelbench ")
    missing = subprocess.run([sys.executable, "-m", "accelbench", "show", "x", "--store",
                              str(tmp_path / "none.sqlite")], env=environ,
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 3 and missing.stderr.startswith("accelbench: error:")
