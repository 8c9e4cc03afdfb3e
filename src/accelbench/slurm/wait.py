"""Waiting for submitted jobs to end: poll squeue (one call for every job) until none
is pending or running, then read each job's end from scontrol or sacct. The clock and
the sleep are seams, and a deadline bounds the wait."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from accelbench.slurm.commands import Slurm
from accelbench.slurm.parse import FINAL_STATES, JobState


def wait_for_jobs(slurm: Slurm, job_ids: Sequence[str], *, interval: float,
                  timeout: float | None = None,
                  clock: Callable[[], float] = time.monotonic,
                  sleep: Callable[[float], None] = time.sleep) -> tuple[list[JobState], bool]:
    """Every job's state once all have ended, or when `timeout` seconds have passed;
    and whether they all ended. A job the controller no longer lists has ended."""
    deadline = None if timeout is None else clock() + timeout
    while True:
        queued = slurm.queue(job_ids)
        active = [state for state in queued.values() if state not in FINAL_STATES]
        if not active:
            return job_states(slurm, job_ids), True
        if deadline is not None and clock() >= deadline:
            return job_states(slurm, job_ids), False
        pause = interval if deadline is None else min(interval, max(deadline - clock(), 0))
        sleep(pause)


def job_states(slurm: Slurm, job_ids: Sequence[str]) -> list[JobState]:
    return [job for job_id in job_ids for job in slurm.jobs(job_id)]
