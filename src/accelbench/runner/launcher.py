"""The supervising side of a distributed job: start the ranks with torchrun, follow them.

Rank 0 writes one JSON line when a case starts and one with its result. A case that
runs past its timeout, or ranks that die, fail that case; the job is started again for
the cases that remain, so one bad case never costs the others.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from accelbench.core.measurement import STATUS_FAILED, Measurement, not_measured
from accelbench.core.timing import TimingPolicy
from accelbench.env.device import DeviceInfo
from accelbench.runner.plan import PlannedCase

STARTUP_TIMEOUT_S = 300.0  # every rank imports torch and joins the group
# After a rank other than 0 reports a failure, how long rank 0 may still need to report
# the case itself (it does when every rank failed alike, e.g. an unsupported setting).
RANK_FAILURE_GRACE_S = 5.0


class RankGroup:
    def __init__(self, nproc_per_node: int, backend: str) -> None:
        self.nproc_per_node = nproc_per_node
        self.backend = backend

    def command(self, job: Path, results: Path) -> list[str]:
        return [
            sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
            f"--nproc-per-node={self.nproc_per_node}",
            "-m", "accelbench.runner.ranks", str(job), str(results),
        ]

    def run(
        self,
        cases: Sequence[PlannedCase],
        device: DeviceInfo,
        policy: TimingPolicy,
        timeout_for: Callable[[PlannedCase], float],
        on_start: Callable[[int], None],
        on_result: Callable[[int, Measurement], None],
    ) -> None:
        """Run the cases as one job (or several, after a failure); report each by index."""
        done = 0
        with tempfile.TemporaryDirectory(prefix="accelbench-ranks-") as tmp:
            attempt = 0
            while done < len(cases):
                attempt += 1
                remaining = cases[done:]
                job = Path(tmp) / f"job-{attempt}.pkl"
                results = Path(tmp) / f"results-{attempt}.jsonl"
                log = Path(tmp) / f"ranks-{attempt}.log"
                group_timeout = max(timeout_for(c) for c in remaining)
                with job.open("wb") as f:
                    pickle.dump({"cases": list(remaining), "device": device, "policy": policy,
                                 "backend": self.backend, "group_timeout_s": group_timeout}, f)
                finished = self._follow(remaining, results, log, job, timeout_for,
                                        lambda i, d=done: on_start(d + i),
                                        lambda i, m, d=done: on_result(d + i, m))
                done += finished

    def _follow(
        self,
        cases: Sequence[PlannedCase],
        results: Path,
        log: Path,
        job: Path,
        timeout_for: Callable[[PlannedCase], float],
        on_start: Callable[[int], None],
        on_result: Callable[[int, Measurement], None],
    ) -> int:
        """Run one job; returns how many cases it settled (each measured or failed)."""
        results.touch()
        with log.open("wb") as log_file:
            process = subprocess.Popen(
                self.command(job, results), stdout=log_file, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
        lines = _LineReader(results)
        current = 0
        started_at = time.time()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S + timeout_for(cases[0])
        rank_failure: str | None = None
        try:
            while current < len(cases):
                records = lines.read()
                for record in records:
                    if record["event"] == "start":
                        current = record["index"]
                        started_at = time.time()
                        deadline = time.monotonic() + timeout_for(cases[current])
                        rank_failure = None
                        on_start(current)
                    elif record["event"] == "rank_failed":
                        if rank_failure is None and record["index"] == current:
                            rank_failure = f"rank {record['rank']}: {record['reason']}"
                            deadline = min(deadline, time.monotonic() + RANK_FAILURE_GRACE_S)
                    else:
                        on_result(record["index"], Measurement.from_dict(record["measurement"]))
                        current = record["index"] + 1
                if records:
                    continue
                code = process.poll()
                if code is not None and not lines.read(peek=True):
                    # A rank's own report of its failure says more than the exit code.
                    reason = rank_failure or f"ranks exited with code {code}{_last_line(log)}"
                    on_result(current, self._failed(cases[current], reason, started_at))
                    return current + 1
                if time.monotonic() > deadline:
                    _kill(process)
                    reason = rank_failure or (
                        f"timed out after {timeout_for(cases[current]):g} s "
                        f"(all {self.nproc_per_node} ranks stopped)")
                    on_result(current, self._failed(cases[current], reason, started_at))
                    return current + 1
                time.sleep(0.05)
        except BaseException:
            _kill(process)
            raise
        process.wait(timeout=60)
        return current

    @staticmethod
    def _failed(planned: PlannedCase, reason: str, started_at: float) -> Measurement:
        return not_measured(planned.case, STATUS_FAILED, reason, started_at,
                            time.time() - started_at)


class _LineReader:
    """The complete JSON lines appended to a file since the last read."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._offset = 0

    def read(self, peek: bool = False) -> list[dict]:
        with self._path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        complete = data[: data.rfind(b"\n") + 1]
        if not peek:
            self._offset += len(complete)
        return [json.loads(line) for line in complete.splitlines() if line.strip()]


def _kill(process: subprocess.Popen[bytes]) -> None:
    """Stop torchrun and every rank it started (they share its session)."""
    if process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _last_line(log: Path) -> str:
    """The most telling line of the ranks' output, for the failure reason."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    for ln in reversed(lines):
        if "Error" in ln or "error" in ln:
            return f": {ln[:300]}"
    return f": {lines[-1][:300]}" if lines else ""
