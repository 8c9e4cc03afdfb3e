"""What the supervisor and its worker process say to each other, as small typed messages.

Everything crosses a multiprocessing pipe, so each message is a plain, picklable
dataclass; a measurement travels as its record (`Measurement.to_dict()`), the same form
the store keeps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelbench.core.device import DeviceInfo
    from accelbench.core.timing import TimingPolicy
    from accelbench.runner.plan import PlannedCase
    from accelbench.runner.turns import TurnSpec


@dataclass(frozen=True)
class ReadFingerprint:
    """Read the device and stack of `device` ("auto", "cpu", "cuda:1", ...)."""

    device: str


@dataclass(frozen=True)
class MeasureCase:
    planned: PlannedCase
    device: DeviceInfo
    policy: TimingPolicy
    # Measured at the same time as another process's case, taking turns (`ab`'s pairs).
    turns: TurnSpec | None = None


@dataclass(frozen=True)
class Stop:
    """Finish: the worker exits without answering."""


Request = ReadFingerprint | MeasureCase | Stop


@dataclass(frozen=True)
class FingerprintRead:
    fingerprint: dict[str, Any]  # Fingerprint.to_dict()


@dataclass(frozen=True)
class CaseMeasured:
    record: dict[str, Any]  # Measurement.to_dict()


@dataclass(frozen=True)
class Refused:
    """The request could not be served: a user error with its exit code."""

    exit_code: int
    message: str


Reply = FingerprintRead | CaseMeasured | Refused
