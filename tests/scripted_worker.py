"""A worker process that answers in this process, as scripted: which cases it is asked
to measure, and which fail, skip or are stopped by Ctrl-C. For tests of a run's
lifecycle (resume, repeat) that must know exactly which cases ran, in no time."""

from __future__ import annotations

import functools
import sys
import time
from typing import Any, ClassVar

from accelbench.core.case import label_value
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseResult, Rate, from_result, not_measured
from accelbench.env.fingerprint import collect
from accelbench.runner import messages
from fakes import FakeClock, no_vendor_tools

CPU = DeviceInfo(type="cpu", index=None, name="Test CPU", platform="cpu")


class ScriptedWorker:
    """Set the class attributes, then hand the class to `run_session` (or patch it in):
    `asked` lists each case asked for, in order, across every instance: its benchmark and
    parameters but the thread count ("launch mode=eager"; "a")."""

    asked: ClassVar[list[str]] = []
    fail: ClassVar[set[str]] = set()  # labels (or benchmark names) that fail
    skip: ClassVar[set[str]] = set()
    # Ctrl-C when asked for the case of this number (1-based, counted in `asked`).
    interrupt_at: ClassVar[int | None] = None
    # The environment the fingerprint is read with: another one is another stack.
    environ: ClassVar[dict[str, str]] = {}

    @classmethod
    def reset(cls) -> None:
        cls.asked = []
        cls.fail = set()
        cls.skip = set()
        cls.interrupt_at = None
        cls.environ = {}

    def __init__(self, env: Any = None) -> None:
        pass

    def ask(self, message: Any, timeout: float) -> Any:
        if isinstance(message, messages.ReadFingerprint):
            return messages.FingerprintRead(collect("cpu", run=no_vendor_tools,
                                                    environ=dict(self.environ)).to_dict())
        case = message.planned.case
        name = " ".join([case.benchmark, *(f"{k}={label_value(v)}" for k, v in case.params
                                           if k != "threads")])
        if ScriptedWorker.interrupt_at == len(ScriptedWorker.asked) + 1:
            raise KeyboardInterrupt
        ScriptedWorker.asked.append(name)
        if {name, case.benchmark} & ScriptedWorker.fail:
            return messages.CaseMeasured(not_measured(case, "failed", "scripted failure",
                                                      time.time(), 0.0).to_dict())
        if {name, case.benchmark} & ScriptedWorker.skip:
            return messages.CaseMeasured(not_measured(case, "skipped", "scripted skip",
                                                      time.time(), 0.0).to_dict())
        timing = CaseContext(CPU, FakeClock(1e-3, noise=0.01, seed=len(self.asked)),
                             message.policy).time(lambda: None)
        result = CaseResult(timing, rates=(Rate("throughput", 1.0, "item/s"),))
        return messages.CaseMeasured(from_result(case, result, (), time.time(), 0.1).to_dict())

    def stop(self) -> None:
        pass

    def kill(self) -> None:
        pass


def scripted_sessions(monkeypatch: Any) -> type[ScriptedWorker]:
    """Every `run_session` of the test gets the scripted worker, its script empty."""
    from accelbench.runner import session

    monkeypatch.setattr(session, "run_session",
                        functools.partial(session.run_session, worker_factory=ScriptedWorker))
    ScriptedWorker.reset()
    return ScriptedWorker


def run_cli(monkeypatch: Any, *args: str) -> int:
    """`accelbench ARGS` in this process, with the command line a run stores (its own)."""
    from accelbench.cli.main import main

    monkeypatch.setattr(sys, "argv", ["accelbench", *args])
    return main(list(args))
