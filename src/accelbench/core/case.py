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
        """`shown` defaults to every parameter. A parameter known not to apply to the
        others (`identity_params`: `reduce` of an all-gather, as records stored before
        hold it) is no part of the case."""
        ordered = tuple(sorted(identity_params(benchmark, params).items()))
        kept = [k for k, _ in ordered]
        names = kept if shown is None else [k for k in shown if k in kept]
        return cls(benchmark, version, family, ordered, device, tuple(sorted(names)), check)

    @property
    def param_dict(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def dtype(self) -> str | None:
        return self.param_dict.get("dtype")

    @property
    def key(self) -> str:
        return case_key(self.benchmark, self.params)

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
        takes its family's name now, one stored before cases said whether they were
        checks is one when its family was a family of checks then, and one stored with
        parameters that did not apply to it has them left out (`identity_params`)."""
        family = upgraded_family(d["benchmark"], d["family"])
        check = d.get("check") is True or family in CHECK_FAMILIES_BEFORE
        return cls.make(d["benchmark"], d["version"], family, d["params"], d["device"],
                        d.get("shown"), bool(check))


def case_key(benchmark: str, params: Iterable[tuple[str, Any]]) -> str:
    """The key of a case: its benchmark and its parameters, in name order."""
    ordered = sorted(params, key=lambda item: item[0])
    text = json.dumps([benchmark, ordered], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# Parameters that are no part of a case's identity where they do not apply (a declared
# parameter's `only_when` with outside UNKEYED), but were stored in it before: per
# benchmark, (parameter, the parameter it depends on, the values of that parameter where
# it does not apply). A record stored before keeps its data; read, its case leaves these
# out, so it has the key of the same case planned now (the store's migration
# 007_case_identity rewrites the stored keys likewise). History, as those records were
# written: a test checks it against today's declarations; never remove an entry.
_NON_REDUCING = ("all-gather", "broadcast", "gather", "scatter", "all-to-all", "send-recv",
                 "barrier")
_NO_SEQ = ("resnet50", "resnet101", "resnet152", "resnet-tiny", "densenet169", "densenet201",
           "densenet-tiny", "vgg11", "vgg13", "vgg16", "vgg19", "vgg-tiny", "vit-b16",
           "vit-tiny", "sd-unet", "sd-unet-tiny")
_NO_IMAGE = ("bert-base", "bert-large", "bert-tiny", "gpt2-small", "gpt2-medium", "gpt2-large",
             "gpt2-xl", "gpt2-tiny", "llama-1b", "llama-7b", "llama-tiny", "lstm",
             "lstm-tiny", "sd-unet", "sd-unet-tiny")
_MODEL_INPUTS = (("seq", "model", _NO_SEQ), ("image", "model", _NO_IMAGE))
NOT_APPLYING_BEFORE: dict[str, tuple[tuple[str, str, tuple[Any, ...]], ...]] = {
    "memory": (("pinned", "op", ("copy", "triad")),),
    "collectives": (("reduce", "op", _NON_REDUCING), ("bytes", "op", ("barrier",)),
                    ("dtype", "op", ("barrier",))),
    **{name: _MODEL_INPUTS for name in ("train", "train-ddp", "infer", "infer-engine",
                                        "serve")},
}


def identity_params(benchmark: str, params: dict[str, Any]) -> dict[str, Any]:
    """A stored case's parameters less those that did not apply to it
    (`NOT_APPLYING_BEFORE`): `reduce` of an all-gather, `bytes` of a barrier, `seq` of a
    vision model. A case stored since has none of them, and keeps all it has."""
    rules = NOT_APPLYING_BEFORE.get(benchmark, ())
    dropped = {name for name, depends_on, where in rules
               if name in params and params.get(depends_on) in where}
    return {k: v for k, v in params.items() if k not in dropped} if dropped else params


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
