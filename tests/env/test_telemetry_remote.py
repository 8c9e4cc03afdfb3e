"""Telemetry read by a child process (env.telemetry.remote): what it gives back, and
what becomes of a child that does not start, answer or stop."""

from __future__ import annotations

import os
import stat
import time

import pytest

from accelbench.env.telemetry import remote
from accelbench.env.telemetry.sampler import TelemetrySampler


def test_the_child_reads_the_host_marks_the_window_and_exits() -> None:
    sampler = remote.RemoteSampler("cpu", None, 0.02).start()
    time.sleep(0.15)
    start = time.perf_counter()
    time.sleep(0.1)
    end = time.perf_counter()
    sampler.mark_window(start, end)
    series = sampler.stop()
    assert "host" in series.sources and len(series.t) >= 5 and series.stopped is None
    # the window, marked with this process's clock, in the child's time base: inside
    # its readings, and as long as it was here
    assert series.window is not None
    assert series.t[0] <= series.window[0] < series.window[1] <= series.t[-1]
    assert series.window[1] - series.window[0] == pytest.approx(end - start, abs=1e-3)
    assert sampler._proc is not None and sampler._proc.poll() is not None
    assert sampler.stop() is series


def fake_child(tmp_path, body: str) -> str:
    """An executable that stands in for `python -m accelbench.env.telemetry.remote`."""
    path = tmp_path / "child.sh"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_child_that_dies_before_reading_leaves_the_readings_to_this_process(tmp_path):
    child = fake_child(tmp_path, "echo 'some library said hello'\nexit 3\n")
    sampler, _ = remote.open_sampler("cpu", None, 0.02, include=None, missing={},
                                              python=child)
    assert isinstance(sampler, TelemetrySampler)
    series = sampler.stop()
    assert "host" in series.sources
    said = series.missing[remote.IN_PROCESS]
    assert said.startswith("the sampling process ") and "exited" in said
    assert said.endswith("the readings were taken in the measuring process")


def test_a_child_that_hangs_at_the_end_is_killed_and_its_series_says_so(tmp_path,
                                                                        monkeypatch):
    monkeypatch.setattr(remote, "STOP_GRACE_S", 0.5)
    marker = tmp_path / "still-running"
    child = fake_child(tmp_path, "read line\necho '{\"started\": {}}'\n"
                                 f"sleep 30\ntouch {marker}\n")
    sampler = remote.RemoteSampler("cpu", None, 0.02, python=child).start()
    began = time.monotonic()
    series = sampler.stop()
    assert time.monotonic() - began < 10
    assert series.t == () and "gave no 'series'" in (series.stopped or "")
    assert sampler._proc is not None and sampler._proc.poll() is not None


def test_a_child_that_cannot_be_started_raises_the_reason(tmp_path) -> None:
    with pytest.raises(remote.RemoteError, match="did not start"):
        remote.RemoteSampler("cpu", None, 0.02,
                             python=str(tmp_path / "no-such-python")).start()


def test_the_child_imports_the_accelbench_this_process_imports(tmp_path) -> None:
    root = remote._package_root()
    assert os.path.isfile(os.path.join(root, "accelbench", "env", "telemetry", "remote.py"))
