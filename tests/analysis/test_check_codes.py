"""The reason codes of a check's verdict: a health check's from its findings, a check
stopped at its deadline, lost with its process or that raised from the run, any other
failure its benchmark's own; a skip or a clean pass has none."""

from __future__ import annotations

from typing import Any

from accelbench.analysis.checks import check_result
from accelbench.benchmarks.health.findings import FAIL, PASS, WARN, Finding
from accelbench.core.case import Case
from accelbench.core.measurement import Measurement
from fakes import stored_measurement


def _check(bench: str, status: str, reason: str | None = None,
           details: dict[str, Any] | None = None, family: str = "validation",
           warnings: tuple[str, ...] = ()) -> Measurement:
    case = Case.make(bench, "v1", family, {"op": "matmul"}, "cpu", check=True)
    return stored_measurement(case, status, reason=reason, details=details or {},
                              warnings=warnings)


def _health(status: str, *found: Finding, reason: str | None = None) -> Measurement:
    return _check("health", status, reason, {"findings": [f.to_dict() for f in found]},
                  family="health")


def test_a_failed_health_check_has_its_failing_findings_codes() -> None:
    m = _health("failed",
                Finding("gpu0", FAIL, "r", "x8 of x16", {}, "ACCEL_PCIE_WIDTH"),
                Finding("gpu0", WARN, "r", "replays", {}, "ACCEL_PCIE_REPLAY"),
                Finding("gpu1", FAIL, "r", "x4 of x16", {}, "ACCEL_PCIE_WIDTH"),
                Finding("gpu2", PASS, "r", "fine"), reason="gpu0: x8 of x16")
    result = check_result(m)
    assert result.codes == ("ACCEL_PCIE_WIDTH",)
    assert [f["code"] for f in result.findings] == [
        "ACCEL_PCIE_WIDTH", "ACCEL_PCIE_REPLAY", "ACCEL_PCIE_WIDTH", None]
    assert result.coded_reason == "ACCEL_PCIE_WIDTH: gpu0: x8 of x16"
    assert result.to_dict()["codes"] == ["ACCEL_PCIE_WIDTH"]


def test_a_pass_with_warnings_has_their_codes_and_a_clean_pass_none() -> None:
    warned = _health("ok", Finding("kernel", WARN, "r", "on", {}, "ACCEL_NUMA_BALANCING"),
                     Finding("node0", PASS, "r", "fine"))
    assert check_result(warned).codes == ("ACCEL_NUMA_BALANCING",)
    assert check_result(_health("ok", Finding("node0", PASS, "r", "fine"))).codes == ()
    assert check_result(_check("numerics", "ok")).codes == ()
    assert check_result(_check("numerics", "skipped", "no fp64 here")).codes == ()


def test_a_failed_check_without_findings_has_its_benchmark_s_code() -> None:
    for bench, code in (("numerics", "ACCEL_NUMERICS"), ("determinism",
                        "ACCEL_NONDETERMINISTIC"), ("onnx", "ACCEL_EXPORT"),
                        ("torchaudio", "ACCEL_LIBRARY"), ("burn-in", "ACCEL_BURN_IN"),
                        ("distributed", "ACCEL_COLLECTIVE"), ("memtest", "ACCEL_MEMTEST")):
        assert check_result(_check(bench, "failed", "error 2e-3 > 1e-3")).codes == (code,)
    # A check of a benchmark with no code of its own: the check's error.
    assert check_result(_check("something-new", "failed", "bad")).codes == (
        "ACCEL_CHECK_ERROR",)


def test_the_run_s_own_failures_have_the_run_s_codes() -> None:
    timed_out = _check("numerics", "failed", "timed out after 600 s (worker stopped)")
    assert check_result(timed_out).codes == ("ACCEL_TIMEOUT",)
    ranks = _check("distributed", "failed", "timed out after 300 s (all 2 ranks stopped)")
    assert check_result(ranks).codes == ("ACCEL_TIMEOUT",)
    for lost in ("worker process crashed (SIGSEGV): core dumped",
                 "worker process exited with code 1", "worker stopped answering",
                 "rank 1 was killed by SIGKILL (signal 9)", "ranks exited with code 1: x"):
        assert check_result(_check("amp", "failed", lost)).codes == ("ACCEL_WORKER_LOST",)
    raised = _check("amp", "failed", "RuntimeError: boom", {"traceback": "Traceback ..."})
    assert check_result(raised).codes == ("ACCEL_CHECK_ERROR",)
    faulted = _check("numerics", "failed", "the kernel logged a GPU hardware fault",
                     {"gpu_events": [{"level": "fail", "kind": "xid", "code": 79}]})
    assert check_result(faulted).codes == ("ACCEL_GPU_FAULT",)


def test_a_stored_code_outside_the_table_is_not_passed_on() -> None:
    found = Finding("gpu0", FAIL, "r", "bad", {}, "ACCEL_PCIE_WIDTH").to_dict()
    m = _health("failed", reason="gpu0: bad")
    m.details["findings"] = [{**found, "code": 'ACCEL_X"} 1\n# EOF'}]
    result = check_result(m)
    assert result.findings[0]["code"] is None
    assert result.codes == ("ACCEL_CHECK_ERROR",)
