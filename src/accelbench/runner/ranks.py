"""What every rank of a distributed job runs: the same cases, in step; rank 0 reports
each case's combined outcome, and any rank its own failure of a case at once.

Started by torchrun, either by `accelbench run --nproc-per-node N` (this module's
`main`, reading its cases from a JSON job file (runner.rank_job) and writing results as
JSON lines), or by the
user (`torchrun ... -m accelbench run`, through `run_cases_as_rank`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from accelbench.core.context import DistInfo
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import STATUS_FAILED, STATUS_OK, Measurement
from accelbench.core.timing import TimingPolicy
from accelbench.runner.lifeline import end_with_owner, running
from accelbench.runner.plan import PlannedCase

__all__ = ["combine", "main", "rank_device", "run_cases_as_rank", "running"]


def rank_device(device: DeviceInfo, info: DistInfo) -> DeviceInfo:
    """Each rank measures on its own local GPU, counted from the one the job was asked
    for (--device cuda:1: rank 0 on cuda:1, rank 1 on cuda:2); CPU ranks share the CPU."""
    if device.type == "cpu":
        return device
    return dataclasses.replace(device, index=(device.index or 0) + info.local_rank)


def run_cases_as_rank(
    cases: Sequence[PlannedCase],
    device: DeviceInfo,
    policy: TimingPolicy,
    info: DistInfo,
    on_start: Callable[[int], None],
    on_result: Callable[[int, Measurement], None],
    on_rank_failure: Callable[[int, Measurement], None] | None = None,
    guard: Callable[[int, PlannedCase], AbstractContextManager[Any]] | None = None,
) -> None:
    """Run every case on this rank; rank 0's callbacks see the combined outcome.

    A rank whose case failed, rank 0 included, says so through `on_rank_failure` at
    once, with its failed measurement: if the other ranks are still inside the case's
    collectives, they will never reach the exchange of outcomes, and whoever supervises
    the job should not wait for them. Each case runs inside `guard(index, case)` (a
    watchdog's deadline). When the exchange of outcomes itself fails, the group is
    broken: GroupBroken says so, with the index of the case.
    """
    from accelbench.runner.distributed import GroupBroken, GroupCoordinator, gather_outcomes
    from accelbench.runner.worker import describe_error, execute_case

    coordinator = GroupCoordinator("cpu" if info.backend != "nccl" else device.torch_device)
    for index, planned in enumerate(cases):
        if info.rank == 0:
            on_start(index)
        with guard(index, planned) if guard else nullcontext():
            measurement = execute_case(planned, device, policy, info, coordinator)
            if measurement.status == STATUS_FAILED and on_rank_failure:
                on_rank_failure(index, dataclasses.replace(
                    measurement, details={**measurement.details, "dist": info.to_dict()}))
            try:
                outcomes = gather_outcomes(measurement.status, measurement.reason)
            except Exception as exc:
                raise GroupBroken(index, measurement.reason or describe_error(exc)) from exc
        if info.rank == 0:
            on_result(index, combine(measurement, outcomes, info))


def combine(
    measurement: Measurement, outcomes: Sequence[tuple[str, str | None]], info: DistInfo
) -> Measurement:
    """Rank 0's measurement, failed if any rank failed, with the job's shape in details."""
    details = {**measurement.details, "dist": info.to_dict()}
    failures = [(rank, reason) for rank, (status, reason) in enumerate(outcomes)
                if status == STATUS_FAILED]
    if measurement.status == STATUS_OK and failures:
        rank, reason = failures[0]
        return dataclasses.replace(
            measurement, status=STATUS_FAILED, reason=f"rank {rank}: {reason}", timings=(),
            rates=(), measured=(),
            details=details,
        )
    return dataclasses.replace(measurement, details=details)


def main(argv: Sequence[str]) -> int:
    """`python -m accelbench.runner.ranks JOB RESULTS`, one process per rank under torchrun."""
    # First, before torch is imported: a rank must not outlive the accelbench that
    # started it, even while it imports.
    end_with_owner()
    from accelbench.runner.distributed import init_group, shutdown_group
    from accelbench.runner.rank_job import read_job

    job_path, results_path = argv
    with open(job_path, encoding="utf-8") as f:
        job = read_job(f.read())
    info = init_group(job.backend, job.device.type, job.group_timeout_s, job.device.index or 0)
    device = rank_device(job.device, info)
    # Every rank appends whole lines, rank 0 its results, each rank its failures: one
    # write(2) per line on an O_APPEND descriptor, so lines of different ranks never mix.
    out = os.open(results_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def emit(record: dict[str, Any]) -> None:
        os.write(out, (json.dumps(record, default=str) + "\n").encode())

    pids: list[int] = []

    def report_failure(index: int, m: Measurement) -> None:
        # A rank that has died breaks the collectives of the others: their failures then
        # only echo its death, which the job's exit will report. It died before they
        # failed, so it is seen here, whenever the supervisor reads the line.
        lost = [r for r, pid in enumerate(pids) if r != info.rank and not running(pid)]
        emit({"event": "rank_failed", "index": index, "rank": info.rank,
              "reason": m.reason or "failed", "lost_peers": lost,
              "measurement": m.to_dict()})

    try:
        pids.extend(_all_pids())
        run_cases_as_rank(
            job.cases, device, job.policy, info,
            on_start=lambda i: emit({"event": "start", "index": i}),
            on_result=lambda i, m: emit({"event": "result", "index": i,
                                         "measurement": m.to_dict()}),
            on_rank_failure=report_failure,
        )
    finally:
        os.close(out)
        shutdown_group()
    return 0


def _all_pids() -> list[int]:
    """Every rank's process id, by rank (the ranks share this node)."""
    import torch.distributed as dist

    pids: list[int] = [0] * dist.get_world_size()
    dist.all_gather_object(pids, os.getpid())
    return pids


if __name__ == "__main__":
    from accelbench.runner.lifeline import exit_rank

    exit_rank(main(sys.argv[1:]))
