"""Shapes and budgets shared by the model tests (conftest.py modules share one name)."""

from __future__ import annotations

from accelbench.core.device import DeviceInfo
from accelbench.core.timing import TimingPolicy

CPU = DeviceInfo(type="cpu", index=None, platform="cpu", name="cpu")
# Tiny shapes: every architecture trains in well under a second per step on 2 cores.
TINY = {"batch": 4, "seq": 16, "image": 32, "steps_per_window": 2}
BRIEF = TimingPolicy(max_time=0.05, warmup_time=0.0, min_samples=3, min_warmup_calls=1)
