"""The newest stored state of each node: its newest run, and the newest measurement of
each of its cases, whichever run that came from (a node's quick run and its validate run
both count). What a fleet's dashboards show (`accelbench export --format openmetrics`).

A node is a run's host name; its device is the run's (for runs) or the case's (for
cases). Pure functions of stored runs; no torch.
"""

from __future__ import annotations

from collections.abc import Iterable
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


def _run_order(record: RunRecord) -> tuple[float, str]:
    return (record.started_at, record.id)


def _case_order(found: LatestCase) -> tuple[float, float, str]:
    return (found.measured_at, *_run_order(found.run))
