"""`accelbench profile` on every rank of a torch.distributed job (under torchrun).

Each rank profiles the same case on its own device and writes its own trace
(`rank<N>.<timestamp>.pt.trace.json.gz`) into one folder per run, which rank 0 names;
rank 0 stores the run, its measurement (failed if any rank failed), the paths of all
the ranks' traces and the analysis of its own trace. On a machine of its own, each
node writes where the same --output path points there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.errors import UserError
from accelbench.profile.capture import Schedule
from accelbench.profile.session import (
    SUITE,
    ProfileOutcome,
    add_analysis,
    default_output,
    plan_one,
)
from accelbench.runner.plan import ValidRequest
from accelbench.runner.recorder import RunRecorder

if TYPE_CHECKING:
    from accelbench.store import Store


def profile_as_rank(
    valid: ValidRequest,
    schedule: Schedule,
    open_store: Callable[[], Store],
    output: Path | None = None,
    argv: Sequence[str] = (),
) -> ProfileOutcome | None:
    """Rank 0's outcome; None on the other ranks."""
    import torch.distributed as dist

    from accelbench.env.fingerprint import collect
    from accelbench.profile.case import profile_case
    from accelbench.runner.distributed import (
        GroupCoordinator,
        gather_outcomes,
        join_as_rank,
        shutdown_group,
    )
    from accelbench.runner.lifeline import end_with_owner
    from accelbench.runner.ranks import combine

    end_with_owner()  # started by `accelbench profile --nproc-per-node`: end with it
    request = valid.request
    if request.nproc_per_node != 1:
        raise UserError("already started by torchrun: leave out --nproc-per-node")
    info, rank_device, backend = join_as_rank(
        request.device, request.backend, valid.registry.get(request.benches[0]).timeout_s)
    try:
        fingerprint = collect(rank_device)
        device = fingerprint.device
        planned = plan_one(valid, device)
        if planned.benchmark.distributed:
            planned = planned.on_world(info.world_size, backend)
        recorder = None
        shared: list[Any] = [None]
        if info.rank == 0:
            recorder = RunRecorder(open_store(), fingerprint, SUITE, argv)
            parent = (Path(output) if output
                      else default_output(recorder.store.location.files_dir))
            shared = [str(parent / recorder.run_id)]
        dist.broadcast_object_list(shared, src=0)
        trace_dir = Path(shared[0])
        coordinator = GroupCoordinator("cpu" if backend != "nccl" else device.torch_device)
        profiled = profile_case(planned, device, schedule, trace_dir, f"rank{info.rank}",
                                info, coordinator)
        m = profiled.measurement
        outcomes = gather_outcomes(m.status, m.reason)
        paths: list[Any] = [None] * info.world_size
        dist.all_gather_object(paths, [str(p) for p in profiled.trace_paths])
        if recorder is None:
            return None
        measurement = combine(m, outcomes, info)
        recorder.record(0, measurement)
        outcome = ProfileOutcome(recorder.run_id, fingerprint, measurement, trace_dir,
                                 tuple(Path(p) for rank in paths for p in rank))
        if profiled.trace_paths:
            add_analysis(outcome, recorder.store, planned, profiled.trace_paths[0])
        recorder.finish(outcome.status)
        return outcome
    finally:
        shutdown_group()
