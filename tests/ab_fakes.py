"""Fake stacks for the tests of `accelbench ab`: a worker per side whose per-process
figure is drawn, B's speed relative to A's known per benchmark, so verdicts are known."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any, ClassVar

from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseResult, Rate, from_result, not_measured
from accelbench.env.fingerprint import collect
from accelbench.runner import messages
from fakes import FakeClock, no_vendor_tools
from scripted_worker import CPU


class Sides:
    """The fake stacks: B's speed relative to A's per benchmark (`speed`), each process's
    noise (`sigma`), and what each side was asked, in order."""

    speed: ClassVar[dict[str, float]] = {}
    sigma: ClassVar[float] = 0.01
    fail_b: ClassVar[set[str]] = set()
    interrupt_at: ClassVar[int | None] = None
    torch: ClassVar[dict[str, str]] = {}  # a side's PyTorch version, where it fakes one
    asked: ClassVar[list[tuple[str, str]]] = []
    rng: ClassVar[random.Random] = random.Random(0)

    @classmethod
    def reset(cls, seed: int = 0) -> None:
        cls.speed, cls.sigma, cls.fail_b, cls.interrupt_at = {}, 0.01, set(), None
        cls.torch = {}
        cls.asked, cls.rng = [], random.Random(seed)


class FakeStackWorker:
    def __init__(self, side: str, env: Any) -> None:
        self.side = side
        self.env = env

    def ask(self, message: Any, timeout: float) -> Any:
        if isinstance(message, messages.ReadFingerprint):
            environ = {"PYTORCH_FAKE_STACK": self.side, **dict(self.env.values)}
            fingerprint = collect("cpu", run=no_vendor_tools, environ=environ).to_dict()
            if self.side in Sides.torch:
                fingerprint["torch"]["version"] = Sides.torch[self.side]
            return messages.FingerprintRead(fingerprint)
        case = message.planned.case
        if Sides.interrupt_at == len(Sides.asked) + 1:
            raise KeyboardInterrupt
        Sides.asked.append((self.side, case.benchmark))
        if self.side == "b" and case.benchmark in Sides.fail_b:
            return messages.CaseMeasured(not_measured(case, "failed", "scripted failure",
                                                      0.0, 0.0).to_dict())
        speed = Sides.speed.get(case.benchmark, 1.0) if self.side == "b" else 1.0
        cost = 1e-3 / speed * math.exp(Sides.rng.gauss(0, Sides.sigma))
        timing = CaseContext(CPU, FakeClock(cost, noise=1e-4, seed=len(Sides.asked)),
                             message.policy).time(lambda: None)
        result = CaseResult(timing, rates=(Rate("throughput", 1.0, "item/s"),))
        return messages.CaseMeasured(from_result(case, result, (), 0.0, 0.1).to_dict())

    def stop(self) -> None:
        pass

    def kill(self) -> None:
        pass


def factory(side: str) -> Callable[[Any], FakeStackWorker]:
    return lambda env: FakeStackWorker(side, env)
