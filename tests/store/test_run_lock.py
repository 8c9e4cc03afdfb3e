"""One process at a time holds a stored run (what `run --resume` takes), on both back-ends:
a second holder is refused with one line, other runs are free, and the lock goes with
its holder, a killed one included."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from store_data import RUN_ARGS

from accelbench.errors import EXIT_USAGE, UserError
from accelbench.store import Store
from accelbench.store.run_lock import lock_path
from postgres import is_postgres


def _two_runs(location: str) -> tuple[str, str]:
    with Store.open(location) as store:
        return (store.begin_run(**RUN_ARGS, started_at=1_750_000_000.0),
                store.begin_run(**RUN_ARGS, started_at=1_750_000_100.0))


def test_one_holder_of_a_run_at_a_time(store_location: str) -> None:
    first, second = _two_runs(store_location)
    with Store.open(store_location, create=False) as one, \
            Store.open(store_location, create=False) as other:
        with one.hold_run(first):
            with pytest.raises(UserError) as refused, other.hold_run(first):
                pass
            assert refused.value.exit_code == EXIT_USAGE
            assert f"run {first} is being resumed by another accelbench process" in str(
                refused.value)
            if not is_postgres(store_location):
                assert "pid " in str(refused.value)
            with other.hold_run(second):  # another run is free
                pass
        with other.hold_run(first):  # let go
            pass
    if not is_postgres(store_location):
        assert not lock_path(Path(store_location), first).exists()


@pytest.mark.slow
def test_a_killed_holder_lets_go_of_its_run(store_location: str) -> None:
    run_id, _ = _two_runs(store_location)
    holder = textwrap.dedent(f"""
        import sys, time
        from accelbench.store import Store
        with Store.open({store_location!r}, create=False) as store, \\
                store.hold_run({run_id!r}):
            print("held", flush=True)
            time.sleep(600)
    """)
    with subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE,
                          text=True) as process:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "held"
        with Store.open(store_location, create=False) as store:
            with pytest.raises(UserError, match="being resumed"), store.hold_run(run_id):
                pass
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=60)
            if is_postgres(store_location):
                _until_the_server_notices(store, run_id)
            with store.hold_run(run_id):
                pass


def _until_the_server_notices(store: Store, run_id: str) -> None:
    """The server lets go of a killed client's locks once it sees its connection end."""
    import time

    deadline = time.monotonic() + 60
    while True:
        try:
            with store.hold_run(run_id):
                return
        except UserError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.mark.slow
def test_a_second_resume_in_another_process_is_refused(store_location: str) -> None:
    run_id, _ = _two_runs(store_location)
    with Store.open(store_location, create=False) as store, store.hold_run(run_id):
        second = subprocess.run([sys.executable, "-m", "accelbench", "run", "--resume",
                                 run_id, "--store", store_location],
                                capture_output=True, text=True, timeout=120)
    assert second.returncode == EXIT_USAGE, second.stderr
    assert second.stderr.count("\n") == 1
    assert f"run {run_id} is being resumed by another accelbench process" in second.stderr
