"""`accelbench run` started by the user under torchrun, on one node or many.

Every rank runs this: it joins the job's process group, reads its own device, plans the
same cases, and runs them in step with the others; only rank 0 opens the store, writes
each result and prints. Without a supervising process, a case that desynchronises the
ranks ends when the process group's timeout expires.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from accelbench.errors import UserError
from accelbench.runner.plan import ValidRequest, expand
from accelbench.runner.recorder import Listener, Outcome, RunRecorder

if TYPE_CHECKING:
    from accelbench.store import Store


def run_as_rank(
    valid: ValidRequest,
    open_store: Callable[[], Store],
    argv: Sequence[str] = (),
    listener: Listener | None = None,
) -> Outcome | None:
    """Returns rank 0's outcome; None on the other ranks."""
    from accelbench.env.fingerprint import collect
    from accelbench.runner.distributed import join_as_rank, shutdown_group
    from accelbench.runner.ranks import run_cases_as_rank

    request = valid.request
    if request.nproc_per_node is not None:
        raise UserError("already started by torchrun: leave out --nproc-per-node")
    info, rank_device, backend = join_as_rank(request.device, request.backend,
                                              max(b.timeout_s for b in valid.registry))
    try:
        fingerprint = collect(rank_device)
        device = fingerprint.device
        cases = [c.on_world(info.world_size, backend) if c.benchmark.distributed else c
                 for c in expand(request, valid.suite, valid.registry, device)]
        if device.type == "cpu":
            # Every rank must plan the same cases, so the count cannot depend on what
            # each rank sees of the host: the cores split between this node's ranks.
            import os

            threads = request.threads or max(1, (os.cpu_count() or 1) // info.local_world_size)
            cases = [c.with_threads(threads) for c in cases]
        if info.rank != 0:
            run_cases_as_rank(cases, device, valid.policy, info, lambda i: None,
                              lambda i, m: None)
            return None

        recorder = RunRecorder(open_store(), fingerprint, request.suite, argv, listener)
        recorder.planned(cases)
        try:
            run_cases_as_rank(cases, device, valid.policy, info,
                              on_start=lambda i: recorder.listener.started(i, cases[i]),
                              on_result=recorder.record)
        except KeyboardInterrupt as stop:
            recorder.interrupt(stop)
        return recorder.finish()
    finally:
        shutdown_group()
