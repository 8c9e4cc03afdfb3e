"""The frozen identity of one benchmark case."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
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

    @classmethod
    def make(
        cls, benchmark: str, version: str, family: str, params: dict[str, Any], device: str
    ) -> Case:
        return cls(benchmark, version, family, tuple(sorted(params.items())), device)

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
    def label(self) -> str:
        """A short, human-readable name: `gemm shape=4096 dtype=fp16`."""
        parts = [f"{k}={_fmt(v)}" for k, v in self.params]
        return " ".join([self.benchmark, *parts])

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "version": self.version,
            "family": self.family,
            "params": dict(self.params),
            "device": self.device,
            "key": self.key,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Case:
        return cls.make(d["benchmark"], d["version"], d["family"], d["params"], d["device"])


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)
