"""The worker: a separate process that imports torch and measures cases one at a time.

The supervisor sends requests over a pipe and waits with a timeout; whatever a case
does to this process (a crash in a vendor library, a hang, an out-of-memory) costs
that case only. `execute_case` is also usable in-process (tests, bench scripts).
"""

from __future__ import annotations

import contextlib
import signal
import time
import traceback
from collections.abc import Callable
from typing import Any

from accelbench.core.context import CaseContext, DistInfo
from accelbench.core.measurement import (
    STATUS_FAILED,
    STATUS_SKIPPED,
    CaseFailed,
    CaseResult,
    CaseSkipped,
    Measurement,
    from_result,
    not_measured,
)
from accelbench.core.timing import SOLO, Coordinator, TimingPolicy, noise_warnings
from accelbench.env.device import DeviceInfo
from accelbench.runner.plan import PlannedCase


def execute_case(
    planned: PlannedCase,
    device: DeviceInfo,
    policy: TimingPolicy,
    dist: DistInfo | None = None,
    coordinator: Coordinator = SOLO,
    adapt: Callable[[CaseContext], CaseContext] | None = None,
    judge: Callable[[CaseContext, CaseResult], tuple[str, ...]] | None = None,
) -> Measurement:
    """Measure one case; every outcome, failures included, becomes a Measurement.

    `adapt` replaces the context the measure function gets (profiling wraps it), and
    `judge` gives the result's warnings in place of the noise check; it may raise
    CaseFailed or CaseSkipped like the measure function.
    """
    from accelbench.runner.devices import make_context, release

    case = planned.case
    started = time.time()
    t0 = time.perf_counter()
    outcome: Measurement
    if device.type not in planned.benchmark.devices:
        return not_measured(case, STATUS_SKIPPED,
                            f"{planned.benchmark.name} does not run on {device.type} devices",
                            started, 0.0)
    try:
        ctx = make_context(device, policy, dist, coordinator)
        if adapt is not None:
            ctx = adapt(ctx)
        result = planned.benchmark.load()(ctx, dict(planned.params))
        notes = judge(ctx, result) if judge else noise_warnings(result.timing, policy)
        outcome = from_result(case, result, notes, started, time.perf_counter() - t0)
    except CaseSkipped as exc:
        outcome = not_measured(case, STATUS_SKIPPED, str(exc), started, time.perf_counter() - t0)
    except CaseFailed as exc:
        outcome = not_measured(case, STATUS_FAILED, str(exc), started, time.perf_counter() - t0)
    except Exception as exc:  # any error in a case is that case's failure, not the run's
        outcome = not_measured(case, STATUS_FAILED, describe_error(exc), started,
                               time.perf_counter() - t0,
                               {"traceback": traceback.format_exc(limit=20)})
    # Outside the except blocks, so the exception's frames (and tensors) are gone.
    with contextlib.suppress(Exception):  # a broken device must not hide the failure
        release(device)
    return outcome


def describe_error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if type(exc).__name__ == "OutOfMemoryError" or "out of memory" in first.lower():
        return f"out of memory: {first}"[:500]
    return f"{type(exc).__name__}: {first}"[:500]


def worker_main(conn: Any) -> None:
    """Entry point of the worker process: answer requests until told to stop."""
    # Ctrl-C is the supervisor's to handle; it stops this process itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        kind = message[0]
        if kind == "stop":
            return
        conn.send(_answer(message))


def _answer(message: tuple[Any, ...]) -> tuple[Any, ...]:
    from accelbench.errors import EXIT_INTERNAL, UserError

    kind = message[0]
    try:
        if kind == "fingerprint":
            from accelbench.env.fingerprint import collect

            fingerprint = collect(message[1])
            return ("fingerprint", fingerprint.to_dict())
        if kind == "case":
            _, planned, device, policy = message
            return ("result", execute_case(planned, device, policy).to_dict())
        return ("error", EXIT_INTERNAL, f"worker: unknown request {kind!r}")
    except UserError as exc:
        return ("error", exc.exit_code, str(exc))
