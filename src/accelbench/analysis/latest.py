"""The newest stored state of each node: its newest run, and the newest measurement of
each of its cases, whichever run that came from (a node's quick run and its validate run
both count). What a fleet's dashboards show (`accelbench export --format openmetrics`,
`latest`) and what a fleet is judged on (`accelbench diagnose` and its fleet baseline,
`node_states`).

For `latest`, a node is a run's host name; its device is the run's (for runs) or the
case's (for cases). For `node_states`, a node is a host and the device its runs ran on,
as `diagnose` names nodes, and a case is its case key, as a baseline holds cases. Pure
functions of stored runs; no torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from accelbench.core.measurement import Measurement
from accelbench.store import RunRecord, StoredRun


@dataclass(frozen=True)
class LatestCase:
    """The newest measurement of one case on one node, and the run it came from."""

    run: RunRecord
    measurement: Measurement

    @property
    def node(self) -> str:
        return self.run.host

    @property
    def device(self) -> str:
        return self.measurement.case.device

    @property
    def measured_at(self) -> float:
        """When the case was measured (unix time); its run's start where the record has
        no time of its own."""
        return self.measurement.started_at or self.run.started_at


@dataclass(frozen=True)
class Latest:
    runs: tuple[StoredRun, ...]  # the newest run of each (node, device), by node and device
    cases: tuple[LatestCase, ...]  # the newest of each (node, device, case), in that order


def latest(runs: Iterable[StoredRun]) -> Latest:
    """The newest run of each (node, device) and the newest measurement of each
    (node, device, case) among `runs`, in any order.

    Newer means started later (a measurement by its own start, a run by its start), ties
    going to the later run id, as `Store.list_runs` orders runs. A case is told apart by
    its benchmark and label, the identity a dashboard shows, so that no two cases of a
    node and device ever give the same series.
    """
    newest_run: dict[tuple[str, str], StoredRun] = {}
    newest_case: dict[tuple[str, str, str, str], LatestCase] = {}
    for run in runs:
        record = run.record
        key = (record.host, record.device)
        held = newest_run.get(key)
        if held is None or _run_order(held.record) < _run_order(record):
            newest_run[key] = run
        for m in run.measurements:
            found = LatestCase(record, m)
            case_key = (record.host, m.case.device, m.case.benchmark, m.case.label)
            kept = newest_case.get(case_key)
            if kept is None or _case_order(kept) <= _case_order(found):
                newest_case[case_key] = found
    return Latest(runs=tuple(newest_run[k] for k in sorted(newest_run)),
                  cases=tuple(newest_case[k] for k in sorted(newest_case)))


@dataclass(frozen=True)
class NodeState:
    """What one node (a host and the device its runs ran on) measured last: its newest
    run, and the newest measurement of each case among its runs on that run's stack.

    A run of another stack (the node before an upgrade) is left out: its figures say
    what the old stack did, and a node is judged against the baseline of its stack.
    """

    run: StoredRun  # the node's newest run: its stack, its host and device
    cases: tuple[LatestCase, ...]  # one per case key, oldest run first, then run order
    other_stack_runs: tuple[str, ...] = ()  # ids of the node's runs on another stack

    @property
    def host(self) -> str:
        return self.run.record.host

    @property
    def device(self) -> str:
        return self.run.record.device

    @property
    def generation_key(self) -> str:
        return self.run.record.generation_key

    @property
    def measurements(self) -> tuple[Measurement, ...]:
        """The newest measurement of each case, in the order of `cases`."""
        return tuple(c.measurement for c in self.cases)

    @property
    def run_ids(self) -> tuple[str, ...]:
        """The runs the newest measurements came from, oldest first."""
        records = {c.run.id: c.run for c in self.cases}
        return tuple(sorted(records, key=lambda i: _run_order(records[i])))

    @property
    def newest_run_id(self) -> str:
        """The newest run any of the measurements came from; the newest run where there
        are none."""
        ids = self.run_ids
        return ids[-1] if ids else self.run.record.id

    def run_by_case(self) -> dict[str, str]:
        """Case key -> the id of the run its newest measurement came from."""
        return {c.measurement.case.key: c.run.id for c in self.cases}


def node_states(runs: Iterable[StoredRun]) -> tuple[NodeState, ...]:
    """Each node among `runs` (in any order), by host and device: its newest run and the
    newest measurement of each of its cases on that run's stack.

    Newer is as for `latest`: a measurement by its own start, then its run's start and
    id, so a newer run that measured other cases (a validate run after a quick run)
    leaves the older run's cases in place.
    """
    by_node: dict[tuple[str, str], list[StoredRun]] = {}
    for run in runs:
        by_node.setdefault((run.record.host, run.record.device), []).append(run)
    return tuple(_node_state(by_node[k]) for k in sorted(by_node))


def _node_state(runs: Sequence[StoredRun]) -> NodeState:
    """The state of one node from all of its runs."""
    ordered = sorted(runs, key=lambda r: _run_order(r.record))
    newest = ordered[-1]
    stack = newest.record.generation_key
    kept = [r for r in ordered if r.record.generation_key == stack]
    other = tuple(r.record.id for r in ordered if r.record.generation_key != stack)
    return NodeState(newest, _newest_by_key(kept), other)


def _newest_by_key(runs: Sequence[StoredRun]) -> tuple[LatestCase, ...]:
    """The newest measurement of each case key among `runs` (oldest run first), in the
    order they were measured: by run, then by place in the run."""
    chosen: dict[str, tuple[tuple[int, int], LatestCase]] = {}
    for i, run in enumerate(runs):
        for j, m in enumerate(run.measurements):
            found = LatestCase(run.record, m)
            held = chosen.get(m.case.key)
            if held is None or _case_order(held[1]) <= _case_order(found):
                chosen[m.case.key] = ((i, j), found)
    return tuple(c for _, c in sorted(chosen.values(), key=lambda item: item[0]))


def _run_order(record: RunRecord) -> tuple[float, str]:
    return (record.started_at, record.id)


def _case_order(found: LatestCase) -> tuple[float, float, str]:
    return (found.measured_at, *_run_order(found.run))
