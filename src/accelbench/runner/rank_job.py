"""What the ranks of a torchrun job that accelbench starts are handed: a JSON file.

The job names the registry its benchmarks are declared in (`Registry.locator`), each
case by its benchmark's name with its resolved parameters and its identity, the device,
the timing policy, the backend and the group's timeout; every rank reads it back into
the same typed cases. Nothing is pickled: what crosses the process boundary can be read
and checked, and a rank runs only benchmarks its registry declares.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.core.case import Case
from accelbench.core.device import DeviceInfo
from accelbench.core.registry import Registry
from accelbench.core.timing import TimingPolicy
from accelbench.runner.plan import PlannedCase

JOB_FORMAT = 1


@dataclass(frozen=True)
class RankJob:
    cases: tuple[PlannedCase, ...]
    device: DeviceInfo
    policy: TimingPolicy
    backend: str
    group_timeout_s: float


def job_json(registry: Registry, cases: Sequence[PlannedCase], device: DeviceInfo,
             policy: TimingPolicy, backend: str, group_timeout_s: float) -> str:
    if registry.locator is None:
        raise ValueError("the cases' registry has no locator: ranks could not find their "
                         "benchmarks")
    return json.dumps({
        "format": JOB_FORMAT,
        "registry": registry.locator,
        "cases": [{"benchmark": c.benchmark.name, "params": dict(c.params),
                   "case": c.case.to_dict(), "ranks": c.ranks} for c in cases],
        "device": device.to_dict(),
        "policy": _policy_dict(policy),
        "backend": backend,
        "group_timeout_s": group_timeout_s,
    })


def read_job(text: str) -> RankJob:
    """The job of its JSON form (written by `job_json` for this very run)."""
    data: dict[str, Any] = json.loads(text)
    if data.get("format") != JOB_FORMAT:
        raise ValueError(f"a rank job of format {data.get('format')!r}, not {JOB_FORMAT}")
    registry = Registry.located(data["registry"])
    cases = tuple(PlannedCase(registry.get(c["benchmark"]), Case.from_dict(c["case"]),
                              dict(c["params"]), int(c["ranks"])) for c in data["cases"])
    policy = dict(data["policy"])
    policy["telemetry_sources"] = tuple(policy.get("telemetry_sources", ()))
    return RankJob(cases, DeviceInfo.from_dict(data["device"]), TimingPolicy(**policy),
                   str(data["backend"]), float(data["group_timeout_s"]))


def _policy_dict(policy: TimingPolicy) -> dict[str, Any]:
    return dataclasses.asdict(policy)
