"""`compare --fail-on-regression` passes only on evidence: with no case in common, or a
case that one side did not measure or has no figure for, it cannot tell (exit 9) and
says why."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from analysis_data import FLEET_STACK, add_run, gemm_case, in_processes

from accelbench.cli.main import main
from accelbench.core.measurement import Measurement, not_measured
from accelbench.errors import EXIT_INCONCLUSIVE, EXIT_OK
from accelbench.store import Store

FLOP = 2 * 4096**3


def _measured(dtype: str, rng: np.random.Generator) -> Measurement:
    return in_processes(gemm_case(dtype), FLOP / 100e12, FLOP, "FLOP/s", rng=rng)


def _two_runs(path: Path, a: list[Measurement], b: list[Measurement]) -> tuple[str, str]:
    with Store.open(path) as store:
        return (add_run(store, host="n1", stack=FLEET_STACK, started_at=1.76e9, measurements=a),
                add_run(store, host="n1", stack=FLEET_STACK, started_at=1.76e9 + 3600,
                        measurements=b))


def _gate(path: Path, a: str, b: str, capsys, *extra: str) -> tuple[int, str]:
    code = main(["compare", a, b, "--store", str(path), "--fail-on-regression", "5", *extra])
    return code, capsys.readouterr().out


def test_runs_with_no_case_in_common_give_the_gate_no_evidence(tmp_path: Path,
                                                               capsys) -> None:
    rng = np.random.default_rng(1)
    path = tmp_path / "s.sqlite"
    a, b = _two_runs(path, [_measured("bf16", rng)], [_measured("fp16", rng)])
    code, out = _gate(path, a, b, capsys)
    assert code == EXIT_INCONCLUSIVE
    assert "no case was compared (1 only in A; 1 only in B)" in out
    assert "no case regressed" not in out
    code, out = _gate(path, a, b, capsys, "--json")
    assert code == EXIT_INCONCLUSIVE
    data = json.loads(out)
    assert data["regressions"] == [] and data["no_evidence"].startswith("no case was compared")


def test_a_case_that_failed_in_b_is_not_a_pass(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(2)
    path = tmp_path / "s.sqlite"
    failed = not_measured(gemm_case("bf16"), "failed", "out of memory", 0.0, 0.0)
    a, b = _two_runs(path, [_measured("bf16", rng), _measured("fp16", rng)],
                     [failed, _measured("fp16", rng)])
    code, out = _gate(path, a, b, capsys)
    assert code == EXIT_INCONCLUSIVE
    assert "1 case(s) could not be judged" in out
    assert "gemm batch=1 dtype=bf16 shape=4096: not measured in B: failed: out of memory" in out
    code, out = _gate(path, a, b, capsys, "--json")
    assert [u["label"] for u in json.loads(out)["unjudged"]] == [
        "gemm batch=1 dtype=bf16 shape=4096"]


def test_a_case_without_a_figure_in_b_is_not_a_pass(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(3)
    path = tmp_path / "s.sqlite"
    bare = Measurement(gemm_case("bf16"), "ok")  # "measured", but with no figure at all
    a, b = _two_runs(path, [_measured("bf16", rng)], [bare])
    code, out = _gate(path, a, b, capsys)
    assert code == EXIT_INCONCLUSIVE, out
    assert "no case was compared" in out


def test_the_gate_passes_when_every_case_was_compared(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(4)
    path = tmp_path / "s.sqlite"
    a, b = _two_runs(path, [_measured("bf16", rng)], [_measured("bf16", rng)])
    code, out = _gate(path, a, b, capsys)
    assert code == EXIT_OK, out
    assert "no case regressed by 5% or more" in out
