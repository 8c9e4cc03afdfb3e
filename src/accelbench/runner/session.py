"""One `accelbench run`: find the device, plan, measure each case, store it.

The supervisor (this module) never imports torch: the worker process does the
measuring, and every finished case is written to the store before the next starts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from accelbench.core.device import DeviceInfo, parse_device_spec
from accelbench.core.worker_env import WorkerEnv
from accelbench.errors import EXIT_INTERNAL, UserError
from accelbench.runner.messages import (
    FingerprintRead,
    ReadFingerprint,
    Refused,
)
from accelbench.runner.plan import PlannedCase, Request, ValidRequest, expand
from accelbench.runner.recorder import Listener, Outcome, RunRecorder, SilentListener
from accelbench.runner.rounds import Rounds, run_distributed, run_in_workers, skip_all
from accelbench.runner.supervisor import Worker, WorkerLost, WorkerSlot

if TYPE_CHECKING:
    from accelbench.store import Store

__all__ = ["Listener", "Outcome", "SilentListener", "run_session"]

FINGERPRINT_TIMEOUT_S = 300.0


def run_session(
    valid: ValidRequest,
    store: Store,
    argv: Sequence[str] = (),
    listener: Listener | None = None,
    case_timeout: float | None = None,
    worker_factory: Callable[[WorkerEnv], Worker] = Worker,
) -> Outcome:
    """`worker_factory` starts a worker process (tests give a fake)."""
    from accelbench.env.fingerprint import Fingerprint
    from accelbench.runner.distributed import check_backend
    from accelbench.runner.lifeline import remove_orphaned_folders

    remove_orphaned_folders()  # of runs that were killed before they could
    request = valid.request
    slot = WorkerSlot(worker_factory)
    try:
        fingerprint = Fingerprint.from_dict(_ask_fingerprint(slot.worker, request.device))
        device: DeviceInfo = fingerprint.device
        cases = expand(request, valid.suite, valid.registry, device,
                       fingerprint.data["devices"]["count"])
        backend = None
        refused: dict[int, str] = {}
        if any(c.benchmark.distributed for c in cases):
            backend = check_backend(request.backend, device.type)
            refused = _refused_ranks(cases, device, fingerprint.data["devices"]["count"],
                                     request)
            cases = [c.on_world(c.ranks, backend) if c.benchmark.distributed else c
                     for c in cases]
            fingerprint = fingerprint.with_cluster(_this_node(cases))
        if device.type == "cpu":
            threads = request.threads or _free_cores()
            cases = [c.with_threads(max(1, threads // c.ranks)) for c in cases]
        recorder = RunRecorder(store, fingerprint, request.suite, argv, listener)
        recorder.planned(cases)

        def timeout_for(planned: PlannedCase) -> float:
            return case_timeout or planned.benchmark.case_timeout(planned.params)

        try:
            for first, segment in _segments(cases):
                rounds = Rounds(segment, first, valid.policy, recorder, request.wait_quiet)
                if segment[0].ranks in refused:
                    skip_all(rounds, refused[segment[0].ranks])
                elif segment[0].benchmark.distributed:
                    assert backend is not None
                    # The ranks get the devices to themselves: a worker would hold a
                    # context on the first GPU (less memory for rank 0, and no start at
                    # all in exclusive-process mode).
                    slot.release()
                    run_distributed(rounds, device, valid.policy, backend, timeout_for)
                else:
                    run_in_workers(rounds, slot, device, valid.policy, timeout_for)
        except KeyboardInterrupt as stop:
            recorder.interrupt(stop)
            slot.kill()
        return recorder.finish()
    finally:
        slot.release()


def _segments(cases: Sequence[PlannedCase]) -> list[tuple[int, list[PlannedCase]]]:
    """Consecutive cases that run the same way: in the worker, or across so many ranks."""
    out: list[tuple[int, list[PlannedCase]]] = []
    for index, planned in enumerate(cases):
        way = (planned.benchmark.distributed, planned.ranks)
        if out and (out[-1][1][0].benchmark.distributed, out[-1][1][0].ranks) == way:
            out[-1][1].append(planned)
        else:
            out.append((index, [planned]))
    return out


def _refused_ranks(cases: Sequence[PlannedCase], device: DeviceInfo, device_count: int,
                   request: Request) -> dict[int, str]:
    """Rank counts of distributed cases the node cannot hold, with the reason, checked
    before any rank starts or the run is begun. A count asked for (--nproc-per-node) is
    refused outright; one a suite asks for skips its cases, so the suite's other cases
    still run on a small node. With --oversubscribe, say so on stderr and go on."""
    import sys

    from accelbench.runner.capacity import check_ranks

    _, first = parse_device_spec(request.device)
    refused = {}
    for ranks in sorted({c.ranks for c in cases if c.benchmark.distributed}):
        try:
            warning = check_ranks(ranks, device.type, device_count, request.oversubscribe,
                                  first=first or 0)
        except UserError as exc:
            if request.nproc_per_node is not None:
                raise
            refused[ranks] = str(exc)
            continue
        if warning:
            print(f"accelbench: warning: {warning}", file=sys.stderr)
    return refused


def _this_node(cases: Sequence[PlannedCase]) -> dict[str, Any]:
    """The one node the ranks of --nproc-per-node run on (env.cluster), with the most
    ranks a case runs on; the ranks inherit this process's interconnect settings."""
    from accelbench.env.cluster import Cluster
    from accelbench.runner.nodes import interconnect_env, node_name

    ranks = max(c.ranks for c in cases if c.benchmark.distributed)
    return Cluster.one_node(node_name(), ranks, interconnect_env()).to_dict()


def _free_cores() -> int:
    """Cores not busy with other work, from a short look at the host (at least one)."""
    import os

    from accelbench.env.host import HostProbe, free_cores, snapshot_quiet

    _, report = snapshot_quiet(0.5, probe=HostProbe(include_children=True))
    return free_cores(report, os.cpu_count() or 1)


def _ask_fingerprint(worker: Worker, device: str) -> dict[str, Any]:
    try:
        reply = worker.ask(ReadFingerprint(device), FINGERPRINT_TIMEOUT_S)
    except WorkerLost as lost:
        raise UserError(f"could not read the device and stack: {lost}", EXIT_INTERNAL) from None
    if isinstance(reply, Refused):
        raise UserError(reply.message, reply.exit_code)
    if not isinstance(reply, FingerprintRead):
        raise UserError(f"could not read the device and stack: unexpected reply {reply!r}",
                        EXIT_INTERNAL)
    return reply.fingerprint
