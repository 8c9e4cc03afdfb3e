"""A real CPU run stores, with every case, the tuning it ran under."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from accelbench.store import Store

pytestmark = pytest.mark.slow


def test_a_real_cpu_gemm_run_stores_that_tunableop_does_not_apply(tmp_path) -> None:
    store = tmp_path / "tuning.sqlite"
    env = {**os.environ, "PYTORCH_TUNABLEOP_ENABLED": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "accelbench", "run", "--bench", "gemm", "-p", "shape=64",
         "--dtype", "fp32", "--device", "cpu", "--max-time", "0.05", "--no-telemetry",
         "--no-report", "--quiet", "--store", str(store)],
        capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr
    with Store.open(store, create=False) as s:
        (run,) = [s.load_run(r.id) for r in s.list_runs()]
    (m,) = run.measurements
    tuning = m.details["tuning"]
    assert tuning["platform"] == "cpu" and tuning["blas"]
    assert tuning["tunableop"] == {
        "applies": False,
        "reason": "TunableOp tunes GEMMs on ROCm and CUDA devices only; it does not apply "
                  "on CPU"}
