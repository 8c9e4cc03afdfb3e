"""The exit code of a run whose cases failed: 1, or the user error's own code where every
failed case failed on the same one (an LLM engine's endpoint unreachable: 11)."""

from __future__ import annotations

from accelbench.core.case import Case
from accelbench.core.measurement import (
    EXIT_CODE,
    STATUS_FAILED,
    STATUS_OK,
    not_measured,
)
from accelbench.core.names import RUN_FAILED
from accelbench.errors import EXIT_CASE_FAILED, EXIT_ENDPOINT, EXIT_OK, EndpointError
from accelbench.runner.recorder import Outcome


def _case(n: int) -> Case:
    return Case("serve-llm", "v", "llm", (("n", n),), "cpu")


def _failed(n: int, code: int | None) -> object:
    details = {} if code is None else {EXIT_CODE: code}
    return not_measured(_case(n), STATUS_FAILED, "why", 0.0, 0.0, details)


def _outcome(*measurements) -> Outcome:
    return Outcome("run", fingerprint=None, measurements=list(measurements))  # type: ignore[arg-type]


def refuse(ctx, params):
    raise EndpointError("http://127.0.0.1:9 is unreachable: connection refused")


def test_every_failure_on_the_endpoint_exits_with_its_code():
    outcome = _outcome(_failed(1, EXIT_ENDPOINT), _failed(2, EXIT_ENDPOINT),
                       not_measured(_case(3), STATUS_OK, "", 0.0, 0.0))
    assert outcome.exit_code == EXIT_ENDPOINT == EndpointError("x").exit_code
    assert outcome.status == RUN_FAILED


def test_mixed_failures_exit_1():
    assert _outcome(_failed(1, EXIT_ENDPOINT), _failed(2, None)).exit_code == EXIT_CASE_FAILED
    assert _outcome(_failed(1, None)).exit_code == EXIT_CASE_FAILED
    assert _outcome().exit_code == EXIT_OK


def test_the_worker_keeps_a_user_errors_code(monkeypatch):
    """A measure function raising a UserError fails its case with the error's line and
    its exit code (not a traceback)."""
    from accelbench.core.device import DeviceInfo
    from accelbench.core.params import Param
    from accelbench.core.registry import Benchmark
    from accelbench.core.timing import TimingPolicy
    from accelbench.runner.plan import PlannedCase
    from accelbench.runner.worker import execute_case

    bench = Benchmark(name="refuses", family="llm", summary="", entry=f"{__name__}:refuse",
                      params=(Param("n", "int", 1),), devices=("cpu",))
    case = _case(1)
    planned = PlannedCase(bench, case, {"n": 1})
    m = execute_case(planned, DeviceInfo("cpu", None, "cpu", "cpu"),
                     TimingPolicy(host_interval=0, telemetry_interval=0))
    assert m.status == STATUS_FAILED
    assert m.reason == "http://127.0.0.1:9 is unreachable: connection refused"
    assert m.details[EXIT_CODE] == EXIT_ENDPOINT
    assert "traceback" not in m.details
