"""Processes end with the accelbench that started them; their folders do not outlive it."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from accelbench.errors import Terminated
from accelbench.runner.lifeline import (
    FOLDER_PREFIX,
    OWNER_ENV,
    OWNER_FILE,
    owned_folder,
    remove_orphaned_folders,
    running,
    start_time,
    terminate_as_interrupt,
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


# A process standing in for a rank: in a session of its own, like torchrun's job, with a
# child of its own (another rank), both to end when the owner named in its environment
# is gone.
RANK = textwrap.dedent("""
    import subprocess, sys, time
    from accelbench.runner.lifeline import end_with_owner
    end_with_owner()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print(child.pid, flush=True)
    time.sleep(600)
""")


@linux_only
@pytest.mark.slow
def test_a_rank_ends_its_process_group_when_its_owner_dies():
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) as owner, \
            subprocess.Popen([sys.executable, "-c", RANK], stdout=subprocess.PIPE, text=True,
                             start_new_session=True,
                             env={**os.environ, OWNER_ENV: str(owner.pid)}) as rank:
        try:
            other_rank = int(rank.stdout.readline())
            assert running(rank.pid) and running(other_rank)
            owner.kill()
            owner.wait()
            assert _wait_until(lambda: rank.poll() is not None)
            assert rank.returncode == -signal.SIGKILL
            assert _wait_until(lambda: not running(other_rank))
        finally:
            owner.kill()
            rank.kill()


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
