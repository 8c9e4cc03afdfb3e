"""The published JSON Schema of `validate --json` and `health --json`: what the commands
print fits it, and outputs that break it (a field missing, a code outside the table) do
not."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import jsonschema
import pytest

from accelbench.analysis.checks import check_results, tally
from accelbench.benchmarks.health.findings import FAIL, PASS, Finding
from accelbench.cli.printing import outcome_json
from accelbench.core.case import Case
from accelbench.report.reasons_doc import SCHEMA_PATH
from fakes import stored_measurement

SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def _printed() -> dict[str, Any]:
    """What print_checks prints for a run of a failed health check, a failed and a
    skipped validation check, as the command builds it."""
    health = Case.make("health", "h1", "health", {"check": "pcie"}, "cpu", check=True)
    found = [Finding("gpu1", FAIL, "narrow fails", "x8 of x16", {"width": 8},
                     "ACCEL_PCIE_WIDTH"), Finding("gpu0", PASS, "narrow fails", "x16", {})]
    numerics = Case.make("numerics", "n1", "validation", {"op": "matmul", "dtype": "fp32"},
                         "cpu", check=True)
    amp = Case.make("amp", "a1", "validation", {"model": "mlp"}, "cpu", check=True)
    measurements = [
        stored_measurement(health, "failed", reason="gpu1: x8 of x16",
                           details={"findings": [f.to_dict() for f in found]}),
        stored_measurement(numerics, "failed", reason="error 2e-3 > 1e-3"),
        stored_measurement(amp, "skipped", reason="no GPU"),
    ]
    outcome = SimpleNamespace(run_id="r1", status="failed", resumed=False, kept=0,
                              fingerprint=SimpleNamespace(generation_key="CPU | torch"),
                              measurements=measurements)
    results = check_results(measurements)
    printed = outcome_json(outcome, "results.sqlite", None,  # type: ignore[arg-type]
                           summary=tally(results), checks=[r.to_dict() for r in results],
                           findings={health.label: [f.to_dict() for f in found]})
    parsed: dict[str, Any] = json.loads(json.dumps(printed))
    return parsed


def test_the_printed_checks_fit_the_schema() -> None:
    printed = _printed()
    VALIDATOR.validate(printed)
    by_check = {c["check"]: c for c in printed["checks"]}
    assert by_check["health"]["codes"] == ["ACCEL_PCIE_WIDTH"]
    assert by_check["health"]["findings"][0]["code"] == "ACCEL_PCIE_WIDTH"
    assert by_check["numerics"]["codes"] == ["ACCEL_NUMERICS"]
    assert by_check["amp"]["codes"] == []


def _broken(change: str) -> dict[str, Any]:
    out = copy.deepcopy(_printed())
    health = next(c for c in out["checks"] if c["check"] == "health")
    if change == "a check without its codes":
        del health["codes"]
    elif change == "a code outside the table":
        health["codes"] = ["ACCEL_NO_SUCH_THING"]
    elif change == "a finding's code outside the table":
        health["findings"][0]["code"] = "DCGM_FR_PCIE_WIDTH"
    elif change == "a failed check without a code":
        health["codes"] = []
    elif change == "a pass with a code":
        health["findings"][1]["code"] = "ACCEL_PCIE_WIDTH"
    elif change == "no summary":
        del out["summary"]
    elif change == "a field of no version":
        health["severity"] = "high"
    return out


@pytest.mark.parametrize("change", ["a check without its codes", "a code outside the table",
                                    "a finding's code outside the table",
                                    "a failed check without a code", "a pass with a code",
                                    "no summary", "a field of no version"])
def test_an_output_that_breaks_the_contract_does_not_fit(change: str) -> None:
    with pytest.raises(jsonschema.ValidationError):
        VALIDATOR.validate(_broken(change))


@pytest.mark.slow
def test_a_real_health_run_fits_the_schema(tmp_path) -> None:
    result = subprocess.run([sys.executable, "-m", "accelbench", "health", "--json",
                             "--no-report", "--store", str(tmp_path / "results.sqlite")],
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode in (0, 1), result.stderr
    printed = json.loads(result.stdout)
    VALIDATOR.validate(printed)
    assert printed["checks"] and printed["measurements"]
    for check in printed["checks"]:
        assert bool(check["codes"]) >= (check["verdict"] == "fail")
