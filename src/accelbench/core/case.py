"""The frozen identity of one benchmark case."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Case:
    """What was measured: benchmark, its version, its parameters and the device.

    `key` identifies "the same case" across runs and machines (benchmark and
    parameters); `version` says whether the code that measures it is the same.
    """

    benchmark: str
    version: str
    family: str
    params: tuple[tuple[str, Any], ...]  # sorted by name
    device: str  # "cpu", "cuda:0", ...
    # The parameters a table shows, decided when the case was planned (switches left at
    # an "off" default say nothing); not part of the identity.
    shown: tuple[str, ...] = field(default=(), compare=False)
    # A check (its family declares it: core.family.Family.checks): its result is a
    # verdict, pass, fail or skip, rather than a figure; not part of the identity.
    check: bool = field(default=False, compare=False)

    @classmethod
    def make(
        cls, benchmark: str, version: str, family: str, params: dict[str, Any], device: str,
        shown: Iterable[str] | None = None, check: bool = False,
    ) -> Case:
        """`shown` defaults to every parameter."""
        ordered = tuple(sorted(params.items()))
        names = [k for k, _ in ordered] if shown is None else [k for k in shown if k in params]
        return cls(benchmark, version, family, ordered, device, tuple(sorted(names)), check)

    @property
    def param_dict(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def dtype(self) -> str | None:
        return self.param_dict.get("dtype")

    @property
    def key(self) -> str:
        text = json.dumps([self.benchmark, self.params], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def shown_params(self) -> tuple[tuple[str, Any], ...]:
        """The (name, value) pairs a table shows, in name order."""
        names = set(self.shown)
        return tuple((k, v) for k, v in self.params if k in names)

    @property
    def label(self) -> str:
        """A short, human-readable name: `gemm shape=4096 dtype=fp16`."""
        parts = [f"{k}={label_value(v)}" for k, v in self.params]
        return " ".join([self.benchmark, *parts])

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "version": self.version,
            "family": self.family,
            "params": dict(self.params),
            "device": self.device,
            "key": self.key,
            "shown": list(self.shown),
            # Only where true: a case of a family of checks written without it (before
            # cases said so) reads as one all the same (`from_dict`).
            **({"check": True} if self.check else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Case:
        """A stored case; one stored before families were named after their packages
        takes its family's name now, and one stored before cases said whether they were
        checks is one when its family was a family of checks then."""
        family = upgraded_family(d["benchmark"], d["family"])
        check = d.get("check") is True or family in CHECK_FAMILIES_BEFORE
        return cls.make(d["benchmark"], d["version"], family, d["params"], d["device"],
                        d.get("shown"), bool(check))


# The families whose cases were checks, before a case said so itself.
CHECK_FAMILIES_BEFORE = ("validation", "health")
# Family names before a family was named after its package: per old name, the new one,
# or per benchmark where the old name was shared by two families.
_FAMILIES_BEFORE = {"model": "models", "collective": "collectives"}
_BENCHMARK_FAMILIES_BEFORE = {("isolate", "collective"): "isolate",
                              ("serve", "model"): "serving"}


def upgraded_family(benchmark: str, family: str) -> str:
    """The family a case of `benchmark` stored under `family` belongs to now."""
    return _BENCHMARK_FAMILIES_BEFORE.get((benchmark, family), renamed_family(family))


def renamed_family(family: str) -> str:
    """A family's name now, given the name it may have had before (a rules file of that
    time names `model` or `collective`)."""
    return _FAMILIES_BEFORE.get(family, family)


def label_value(value: Any) -> str:
    """A parameter value as a case label writes it: switches yes/no, as every table does
    (`report.units.format_plain`); case patterns match either spelling."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)
