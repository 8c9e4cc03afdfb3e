"""`accelbench run` started by the user under torchrun, on one node or many.

Every rank runs this: it joins the job's process group, reads its own device, plans the
same cases, and runs them in step with the others; only rank 0 opens the store, writes
each result and prints. Without a supervising process, a case that desynchronises the
ranks ends when the process group's timeout expires.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from typing import Any

from accelbench import __version__
from accelbench.core.registry import Registry
from accelbench.errors import UserError
from accelbench.runner.plan import Request, expand, timing_policy, validate
from accelbench.runner.session import Listener, Outcome, SilentListener


def run_as_rank(
    request: Request,
    registry: Registry,
    open_store: Callable[[], Any],
    argv: Sequence[str] = (),
    listener: Listener | None = None,
) -> Outcome | None:
    """Returns rank 0's outcome; None on the other ranks."""
    from accelbench.env.fingerprint import collect
    from accelbench.runner.distributed import join_as_rank, shutdown_group
    from accelbench.runner.ranks import run_cases_as_rank

    if request.nproc_per_node is not None:
        raise UserError("already started by torchrun: leave out --nproc-per-node")
    suite = validate(request, registry)
    policy = timing_policy(suite, request)
    info, rank_device, backend = join_as_rank(request.device, request.backend,
                                              max(b.timeout_s for b in registry))
    try:
        fingerprint = collect(rank_device)
        device = fingerprint.device
        cases = [c.on_world(info.world_size, backend) if c.benchmark.distributed else c
                 for c in expand(request, suite, registry, device)]
        if info.rank != 0:
            run_cases_as_rank(cases, device, policy, info, lambda i: None, lambda i, m: None)
            return None

        listener = listener or SilentListener()
        store = open_store()
        run_id = store.begin_run(
            fingerprint=fingerprint.to_dict(), fingerprint_id=fingerprint.fingerprint_id,
            generation_key=fingerprint.generation_key, device=device.torch_device,
            suite=request.suite, argv=list(argv), host=socket.gethostname(),
            accelbench_version=__version__,
        )
        outcome = Outcome(run_id, fingerprint)
        listener.planned(cases, fingerprint, run_id)

        def record(i: int, measurement: Any) -> None:
            store.add_measurement(run_id, measurement)
            outcome.measurements.append(measurement)
            listener.finished(i, measurement)

        try:
            run_cases_as_rank(cases, device, policy, info,
                              on_start=lambda i: listener.started(i, cases[i]),
                              on_result=record)
        except KeyboardInterrupt:
            outcome.interrupted = True
        store.finish_run(run_id, outcome.status)
        return outcome
    finally:
        shutdown_group()
