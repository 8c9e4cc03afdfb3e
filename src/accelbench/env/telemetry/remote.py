"""Telemetry read by a process of its own, beside the process that measures.

A reading is Python work: the host source's takes about 0.1 ms of CPU, a vendor
binding's marshalling more, and a sampler thread in the measuring process holds the GIL
for all of it, every interval, while the timed loop waits. On an idle 2-core VM that
raised the mean time of accelbench's eager launch case (PyTorch's dispatch, microseconds a
call) by 2% with the host source and 3% with a stand-in vendor source holding the GIL
0.5 ms a reading, intervals well above noise, where the same readings taken by a child
process cost nothing measurable (bench/telemetry_gil_overhead.py; docs/measurement.md).
So the runner's workers sample from a child: `RemoteSampler` has TelemetrySampler's
interface and runs one in `python -m accelbench.env.telemetry.remote`, which opens the
sources itself (a vendor library's handles cannot cross processes) and speaks JSON lines
on its standard input and output:

    child:  {"started": {source: why not opened, ...}}     once it has read once
    parent: {"window": [start, end]}                       the timed part (perf_counter)
    parent: {"stop": true}
    child:  {"series": Series.to_dict()}                   then it exits

`time.perf_counter` is the system's monotonic clock on Linux, the same in both processes,
so a window marked in the parent is the child's own. A child that does not start in time
is killed and `open_sampler` samples in the measuring process, saying so in the Series'
`missing` (IN_PROCESS); one that does not answer at the end is killed and its Series says
why it has no readings (`stopped`).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import IO, Any

from accelbench.core.telemetry import Series
from accelbench.env.telemetry.sampler import TelemetrySampler

# The Series' `missing` entry that says the readings were taken in the measuring process.
IN_PROCESS = "sampling process"
START_TIMEOUT_S = 20.0  # spawning Python and opening a vendor library
STOP_GRACE_S = 10.0  # beyond one interval, for the last reading and the reply


class RemoteError(RuntimeError):
    """The sampling process did not start, answer or stop as it should."""


class RemoteSampler:
    """`start()`, run the case, `mark_window()` with the timed part, `stop()` for the
    Series: TelemetrySampler's calls, the readings taken in a child process."""

    def __init__(self, device_type: str, device_index: int | None, interval_s: float, *,
                 include: Collection[str] | None = None,
                 missing: Mapping[str, str] | None = None,
                 python: str | None = None) -> None:
        self.interval_s = float(interval_s)
        self._args = {"device_type": device_type, "device_index": device_index,
                      "interval_s": self.interval_s,
                      "include": None if include is None else sorted(include),
                      "missing": dict(missing or {})}
        self._python = python or sys.executable
        self._proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.not_opened: dict[str, str] = {}  # sources the child could not open, and why
        self._series: Series | None = None

    def start(self) -> RemoteSampler:
        """Start the child and wait for its first reading; RemoteError if it does not
        come (the child is then gone)."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (_package_root(), os.environ.get("PYTHONPATH", "")) if p)}
        try:
            self._proc = subprocess.Popen(
                [self._python, "-m", "accelbench.env.telemetry.remote"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                text=True, env=env, close_fds=True, start_new_session=True)
        except OSError as exc:
            raise RemoteError(f"the sampling process did not start: {exc}") from None
        assert self._proc.stdout is not None
        threading.Thread(target=_read_lines, args=(self._proc.stdout, self._lines),
                         name="accelbench-telemetry-reader", daemon=True).start()
        try:
            self._send(self._args)
            started = self._receive(START_TIMEOUT_S, "started")
        except RemoteError:
            self._close()
            raise
        self.not_opened = {str(k): str(v) for k, v in dict(started).items()}
        return self

    def mark_window(self, start: float, end: float) -> None:
        if not end >= start:
            raise ValueError(f"window end {end} is before its start {start}")
        with contextlib.suppress(RemoteError):  # stop() says what became of the child
            self._send({"window": [start, end]})

    def stop(self) -> Series:
        """The child's Series; one that says why there is none if the child failed."""
        if self._series is not None:
            return self._series
        try:
            self._send({"stop": True})
            data = self._receive(self.interval_s + STOP_GRACE_S, "series")
            self._series = Series.from_dict(data)
        except (RemoteError, ValueError, TypeError, KeyError) as exc:
            self._series = Series(interval_s=self.interval_s,
                                  stopped=f"telemetry was not read: {exc}")
        finally:
            self._close()
        return self._series

    def __enter__(self) -> RemoteSampler:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- internals

    def _send(self, message: Mapping[str, Any]) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.poll() is not None:
            raise RemoteError("the sampling process has exited")
        try:
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
        except (OSError, ValueError) as exc:
            raise RemoteError(f"the sampling process stopped listening: {exc}") from None

    def _receive(self, timeout: float, key: str) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                line = self._lines.get(timeout=max(left, 0.0))
            except queue.Empty:
                self._close()
                raise RemoteError(f"the sampling process gave no {key!r} within "
                                  f"{timeout:.0f} s") from None
            if line is None:
                self._close()
                raise RemoteError(f"the sampling process exited before its {key!r}")
            try:
                message = json.loads(line)
            except ValueError:
                continue  # a library that printed to stdout: not ours
            if isinstance(message, dict) and key in message:
                return message[key]

    def _close(self) -> None:
        proc = self._proc
        if proc is None:
            return
        for stream in (proc.stdin,):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):  # the child and what it started
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _package_root() -> str:
    """The folder accelbench is imported from here, so the child imports the same."""
    return str(Path(__file__).resolve().parents[3])


def _read_lines(stream: IO[str], into: queue.Queue[str | None]) -> None:
    """The child's lines, then None; the stream is closed here, by its one reader."""
    try:
        for line in stream:
            into.put(line)
    except (OSError, ValueError):
        pass
    into.put(None)
    with contextlib.suppress(OSError):
        stream.close()


def open_sampler(device_type: str, device_index: int | None, interval_s: float, *,
                 include: Collection[str] | None, missing: Mapping[str, str],
                 python: str | None = None
                 ) -> tuple[RemoteSampler | TelemetrySampler, dict[str, str]]:
    """A started sampler of the device's and the host's telemetry: a RemoteSampler, or
    where its process cannot start, a TelemetrySampler in this process (its Series says
    so). With it, the sources that did not open, and why."""
    remote = RemoteSampler(device_type, device_index, interval_s, include=include,
                           missing=missing, python=python)
    try:
        return remote.start(), remote.not_opened
    except RemoteError as exc:
        why = str(exc)
    from accelbench.env.telemetry.sources import open_sources

    sources, not_opened = open_sources(device_type, device_index, include=include)
    said = {**missing, **not_opened,
            IN_PROCESS: f"{why}; the readings were taken in the measuring process"}
    return TelemetrySampler(sources, said, interval_s).start(), not_opened


def serve(stdin: IO[str], stdout: IO[str]) -> int:
    """The child: open the sources, sample, mark windows, and answer the Series."""
    from accelbench.env.telemetry.sources import open_sources

    def say(message: Mapping[str, Any]) -> None:
        stdout.write(json.dumps(message) + "\n")
        stdout.flush()

    first = stdin.readline()
    if not first:
        return 1
    args = json.loads(first)
    include = args.get("include")
    try:
        sources, not_opened = open_sources(args["device_type"], args["device_index"],
                                           include=include)
    except Exception as exc:  # a vendor library that fails must not cost the case
        sources, not_opened = [], {"telemetry": f"could not open its sources: "
                                                f"{type(exc).__name__}: {exc}"}
    sampler = TelemetrySampler(sources, {**args.get("missing", {}), **not_opened},
                               float(args["interval_s"])).start()
    say({"started": not_opened})
    for line in stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "window" in message:
            start, end = message["window"]
            sampler.mark_window(float(start), float(end))
        elif message.get("stop"):
            break
    say({"series": sampler.stop().to_dict()})  # also at EOF: the parent may be gone
    return 0


if __name__ == "__main__":
    sys.exit(serve(sys.stdin, sys.stdout))
