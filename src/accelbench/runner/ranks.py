"""What every rank of a distributed job runs: the same cases, in step; rank 0 reports.

Started by torchrun, either by `accelbench run --nproc-per-node N` (this module's
`main`, reading its cases from a job file and writing results as JSON lines), or by the
user (`torchrun ... -m accelbench run`, through `run_cases_as_rank`).
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import sys
from collections.abc import Callable, Sequence
from typing import Any

from accelbench.core.context import DistInfo
from accelbench.core.measurement import STATUS_FAILED, STATUS_OK, Measurement
from accelbench.core.timing import TimingPolicy
from accelbench.env.device import DeviceInfo
from accelbench.runner.plan import PlannedCase


def rank_device(device: DeviceInfo, info: DistInfo) -> DeviceInfo:
    """Each rank measures on its own local GPU; CPU ranks share the CPU."""
    if device.type == "cpu":
        return device
    return dataclasses.replace(device, index=info.local_rank)


def run_cases_as_rank(
    cases: Sequence[PlannedCase],
    device: DeviceInfo,
    policy: TimingPolicy,
    info: DistInfo,
    on_start: Callable[[int], None],
    on_result: Callable[[int, Measurement], None],
    on_rank_failure: Callable[[int, str], None] | None = None,
) -> None:
    """Run every case on this rank; rank 0's callbacks see the combined outcome.

    A rank other than 0 whose case failed says so through `on_rank_failure` at once:
    if the other ranks are still inside the case's collectives, they will never reach
    the exchange of outcomes, and the supervisor should not wait for them.
    """
    from accelbench.runner.distributed import GroupCoordinator, gather_outcomes
    from accelbench.runner.worker import execute_case

    coordinator = GroupCoordinator("cpu" if info.backend != "nccl" else device.torch_device)
    for index, planned in enumerate(cases):
        if info.rank == 0:
            on_start(index)
        measurement = execute_case(planned, device, policy, info, coordinator)
        if info.rank != 0 and measurement.status == STATUS_FAILED and on_rank_failure:
            on_rank_failure(index, measurement.reason or "failed")
        outcomes = gather_outcomes(measurement.status, measurement.reason)
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
    from accelbench.runner.distributed import init_group, shutdown_group

    job_path, results_path = argv
    with open(job_path, "rb") as f:
        job: dict[str, Any] = pickle.load(f)
    info = init_group(job["backend"], job["device"].type, job["group_timeout_s"])
    device = rank_device(job["device"], info)
    # Every rank appends whole lines (O_APPEND): rank 0 its results, others their failures.
    out = open(results_path, "a", encoding="utf-8")  # noqa: SIM115

    def emit(record: dict[str, Any]) -> None:
        out.write(json.dumps(record, default=str) + "\n")
        out.flush()

    try:
        run_cases_as_rank(
            job["cases"], device, job["policy"], info,
            on_start=lambda i: emit({"event": "start", "index": i}),
            on_result=lambda i, m: emit({"event": "result", "index": i,
                                         "measurement": m.to_dict()}),
            on_rank_failure=lambda i, reason: emit({"event": "rank_failed", "index": i,
                                                    "rank": info.rank, "reason": reason}),
        )
    finally:
        out.close()
        shutdown_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
