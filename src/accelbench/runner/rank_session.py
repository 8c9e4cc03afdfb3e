"""`accelbench run` started by the user under torchrun, on one node or many.

Every rank runs this: it joins the job's process group, says which node it is on and with
which interconnect settings (gathered once, into the fingerprint's "cluster"), reads its
own device, plans the same cases, and runs them in step with the others; only rank 0
opens the store, writes each result and prints.

No accelbench supervises the ranks, so each watches the job itself (runner.job_watch):
when a node dies or stops answering during a case, rank 0 stores that case as failed,
naming the nodes and ranks that stopped answering, stores the cases it can no longer run
as failed too, and finishes the run (failed, exit 1); every rank ends within the case's
timeout and the probe that names the lost ranks.
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from accelbench.core.untrusted import is_decimal
from accelbench.errors import EXIT_CASE_FAILED, UserError
from accelbench.runner.job_watch import PEER_LOST
from accelbench.runner.plan import PlannedCase, ValidRequest, expand
from accelbench.runner.recorder import Listener, Outcome, RunRecorder
from accelbench.runner.session import conduct, say_given_aside, timeouts

if TYPE_CHECKING:
    from accelbench.core.context import DistInfo
    from accelbench.core.device import DeviceInfo
    from accelbench.env.cluster import Cluster
    from accelbench.env.fingerprint import Fingerprint
    from accelbench.runner.job_watch import Channel, Watchdog
    from accelbench.store import Store


def run_as_rank(
    valid: ValidRequest,
    open_store: Callable[[], Store],
    argv: Sequence[str] = (),
    listener: Listener | None = None,
    case_timeout: float | None = None,
    reopen_store: Callable[[], Store] | None = None,
) -> Outcome | None:
    """Returns rank 0's outcome; None on the other ranks.

    `reopen_store` opens another connection to the store, for the watchdog thread that
    stores the run when the main thread is stuck in a collective of a broken group.
    """
    return conduct(RankExecutor(valid, case_timeout, reopen_store), open_store,
                   valid.request, argv, listener)


class RankExecutor:
    """This rank's part of a run under a torchrun the user started (see the module
    docstring): every rank plans the same cases and runs them in step; rank 0 stores."""

    def __init__(self, valid: ValidRequest, case_timeout: float | None = None,
                 reopen_store: Callable[[], Store] | None = None) -> None:
        if valid.request.nproc_per_node is not None:
            raise UserError("already started by torchrun: leave out --nproc-per-node")
        self.valid = valid
        self.case_timeout = case_timeout
        self.reopen_store = reopen_store
        self._longest = case_timeout or max(b.timeout_s for b in valid.registry)
        self._info: DistInfo | None = None
        self._backend = ""
        self._cluster: Cluster | None = None
        self._device: DeviceInfo | None = None
        self._watchdog: Watchdog | None = None
        self._job: _Job | None = None
        self._broken = False

    @property
    def stores(self) -> bool:
        return self._info is not None and self._info.rank == 0

    def fingerprint(self) -> Fingerprint:
        from accelbench.env.fingerprint import collect
        from accelbench.runner.distributed import join_as_rank
        from accelbench.runner.job_watch import SETTLE_WAIT_S

        request = self.valid.request
        # The group's own timeout comes after the watchdog's deadline and its settling,
        # so that the watchdog, not NCCL's teardown of the process, ends a hung case.
        self._info, rank_device, self._backend = join_as_rank(
            self.valid.device, request.backend, self._longest + SETTLE_WAIT_S)
        self._cluster = gather_cluster(self._info)
        return collect(rank_device)

    def plan(self, fingerprint: Fingerprint) -> tuple[Fingerprint, list[PlannedCase]]:
        assert self._info is not None and self._cluster is not None
        request = self.valid.request
        device = self._device = fingerprint.device
        world = self._info.world_size
        planned = expand(self.valid, device)
        say_given_aside(self.valid, planned, say=self._info.rank == 0)  # each rank alike
        # This job's world is every case's: a suite's scaling series of rank counts is
        # one case here.
        cases = list({c.case: c for c in (
            c.on_world(world, self._backend) if c.benchmark.distributed else c
            for c in planned)}.values())
        fingerprint = fingerprint.with_cluster(self._cluster.to_dict())
        if device.type == "cpu":
            cases, source = on_threads(cases, request.threads, self._info.local_world_size)
            fingerprint = fingerprint.with_threads_source(source)
        return fingerprint, cases

    def execute(self, cases: Sequence[PlannedCase], recorder: RunRecorder | None
                ) -> str | None:
        from accelbench.runner.distributed import GroupBroken
        from accelbench.runner.job_watch import Channel, Watchdog
        from accelbench.runner.ranks import run_cases_as_rank
        from accelbench.runner.rounds import process_budget

        info, device, cluster = self._info, self._device, self._cluster
        assert info is not None and device is not None and cluster is not None
        policy = self.valid.policy
        timeout_for = timeouts(self.case_timeout)
        channel = (Channel.connect(info.rank, info.world_size, self._longest)
                   if info.world_size > 1 else None)
        if recorder is None:
            self._watchdog = Watchdog(channel) if channel else None
            try:
                run_cases_as_rank(cases, device, policy, info, lambda i: None,
                                  lambda i, m: None,
                                  on_rank_failure=_tell_failure(channel),
                                  guard=_guard(self._watchdog, timeout_for))
            except GroupBroken:
                self._broken = True
                if self._watchdog is None:
                    raise
                self._watchdog.broken_here()  # ends this process once rank 0 has settled
            return None

        self._job = job = _Job(recorder, cases, info, cluster, channel, self.reopen_store,
                               process_budget(policy))
        self._watchdog = (Watchdog(channel, on_broken=job.settle_from_watchdog)
                          if channel else None)
        try:
            run_cases_as_rank(cases, device, policy, info,
                              on_start=job.started, on_result=job.record,
                              on_rank_failure=_tell_failure(channel),
                              guard=_guard(self._watchdog, timeout_for))
        except GroupBroken as lost:
            self._broken = True
            job.settle(lost.index, f"rank 0: {_first_sentence(lost.error)}")
        return None

    def interrupted(self, stop: KeyboardInterrupt, recorder: RunRecorder) -> None:
        # torchrun's agent stops every worker of a node (SIGTERM) when one of them
        # fails: if peers are gone, the case in flight failed for that.
        job = self._job
        if (job is not None and job.in_flight is not None and job.channel is not None
                and job.channel.probe()):
            self._broken = True
            job.settle(job.in_flight, "stopped by SIGTERM")
        else:
            recorder.interrupt(stop)

    def close(self) -> None:
        from accelbench.runner.distributed import shutdown_group

        if self._info is None or self._broken:
            return
        if self._watchdog is not None:
            self._watchdog.stop()
        shutdown_group()


def on_threads(cases: Sequence[PlannedCase], requested: int | None, ranks_here: int
                ) -> tuple[list[PlannedCase], str]:
    """The cases on `--threads` threads per rank, else on all but one of the CPUs this
    process may use shared between this node's ranks, and how the count was chosen.
    Every rank must plan the same cases, so the count depends on no reading of the
    host's load: the ranks of a node start with torchrun's CPU set, and so count the
    same CPUs."""
    from accelbench.runner.capacity import (
        default_threads,
        split_threads,
        threads_source,
        usable_cpus,
    )

    cpus = usable_cpus()
    threads = requested or split_threads(default_threads(cpus), ranks_here)
    split = f"this node's {ranks_here} ranks" if requested is None and ranks_here > 1 else None
    return [c.with_threads(threads) for c in cases], threads_source(requested, cpus, split)


def gather_cluster(info: DistInfo) -> Cluster:
    """Every rank's node and interconnect settings, on every rank (one exchange)."""
    import os

    import torch.distributed as dist

    from accelbench.env.cluster import Cluster, RankPlace
    from accelbench.runner.nodes import interconnect_env, node_name

    group_rank = os.environ.get("GROUP_RANK", "")
    place = RankPlace(info.rank, int(group_rank) if is_decimal(group_rank) else None,
                      node_name(), interconnect_env())
    places: list[Any] = [None] * info.world_size
    dist.all_gather_object(places, place)
    return Cluster.from_places(places)


def _tell_failure(channel: Channel | None) -> Callable[[int, Any], None] | None:
    if channel is None:
        return None
    return lambda index, m: channel.fail_case(index, m.reason or "failed")


def _guard(watchdog: Watchdog | None, timeout_for: Callable[[PlannedCase], float]) -> Any:
    if watchdog is None:
        return None
    return lambda index, planned: watchdog.case(index, timeout_for(planned))


class _Job:
    """Rank 0's account of the job: which case is in flight, and how to settle the run
    when the group breaks (from the main thread, or from the watchdog's)."""

    def __init__(self, recorder: RunRecorder, cases: Sequence[PlannedCase], info: DistInfo,
                 cluster: Cluster, channel: Channel | None,
                 reopen_store: Callable[[], Store] | None, budget_s: float = 0.0) -> None:
        self.recorder = recorder
        self.cases = cases
        self.info = info
        self.cluster = cluster
        self.channel = channel
        self.reopen_store = reopen_store
        self.in_flight: int | None = None
        self.started_at = time.time()
        self.budget_s = budget_s  # each case's planned seconds (rounds.process_budget)
        self._settling = threading.Lock()

    def started(self, index: int) -> None:
        self.in_flight = index
        self.started_at = time.time()
        listener = self.recorder.listener
        listener.started(index, self.cases[index])
        # Each case is measured once, by the job's ranks: one process of one.
        listener.process_started(index, self.cases[index], 1, 1, self.budget_s)

    def record(self, index: int, measurement: Any) -> None:
        self.recorder.listener.process_done(index, 1, 1, measurement)
        self.recorder.record(index, measurement)
        self.in_flight = None

    def settle(self, index: int, how: str) -> None:
        """Store case `index` as failed, with the ranks that stopped answering, and every
        later case as not run; finish the run; let the other ranks end."""
        with self._settling:
            self._store_failed(index, how, self.recorder)

    def settle_from_watchdog(self, index: int, how: str) -> None:
        """The main thread is stuck in a collective: store through another connection,
        then end the process (the lock is never released: nothing else settles)."""
        import sys

        from accelbench.runner.job_watch import end_process

        if self.reopen_store is None or not self._settling.acquire(blocking=False):
            return
        try:
            store = self.reopen_store()
        except Exception as exc:  # the main thread may still settle, once it is free
            self._settling.release()
            print(f"accelbench: warning: cannot store the run from the watchdog: {exc}",
                  file=sys.stderr, flush=True)
            return
        try:
            self._store_failed(index, how, RunRecorder.resumed(
                store, self.recorder.outcome, self.recorder.listener))
        finally:
            store.close()
        print(f"accelbench: error: {self.cases[index].case.label}: the job lost ranks; "
              f"run {self.recorder.run_id} stored as failed", file=sys.stderr, flush=True)
        if self.channel is not None:
            _leave(self.channel)
        end_process(EXIT_CASE_FAILED)

    def _store_failed(self, index: int, how: str, recorder: RunRecorder) -> None:
        lost = self.channel.probe() if self.channel else []
        own = self.channel.failures(index) if self.channel else {}
        if how == PEER_LOST and own:  # said by another rank: its own words are better
            rank = min(own)
            how = f"rank {rank}: {_first_sentence(own[rank])}"
        reason = failure_reason(self.cluster, lost, own, how)
        details = {"dist": self.info.to_dict(), "lost_ranks": lost,
                   "lost_nodes": sorted({n.name for r in lost
                                         if (n := self.cluster.node_of(r)) is not None})}
        for i in range(index, len(self.cases)):
            recorder.record(i, _failed(self.cases[i], reason if i == index
                                       else f"not run: {reason}",
                                       self.started_at if i == index else time.time(),
                                       details))
        recorder.finish()
        if self.channel is not None:
            self.channel.settle()
            # The others wait for this rank to leave: at exit, its output written (or
            # at once, when the watchdog ends the process).
            atexit.register(_leave, self.channel)


def _leave(channel: Channel) -> None:
    with suppress(Exception):
        channel.leave()


def _first_sentence(error: str) -> str:
    """Gloo's transport errors end with advice ("This is typically caused by ...")."""
    return error.split(". This is typically caused", 1)[0]


def failure_reason(cluster: Cluster, lost: Sequence[int], own: dict[int, str],
                   how: str) -> str:
    """Why the case failed: the nodes and ranks that stopped answering (and how that was
    seen), else the first rank's own failure of it, else how it was seen."""
    if lost:
        return f"{cluster.describe(lost)} stopped answering ({how})"
    if own:
        rank = min(own)
        return f"rank {rank}: {own[rank]}"
    return how


def _failed(planned: PlannedCase, reason: str, started_at: float,
            details: dict[str, Any]) -> Any:
    from accelbench.core.measurement import STATUS_FAILED, not_measured

    return not_measured(planned.case, STATUS_FAILED, reason, started_at,
                        max(0.0, time.time() - started_at), details=dict(details))
