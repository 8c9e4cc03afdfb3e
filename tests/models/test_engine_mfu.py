"""Which peak an engine's MFU is taken against: the int8 engine's against the int8 peak."""

from __future__ import annotations

import pytest

from accelbench.benchmarks import REGISTRY
from accelbench.core.peaks import DevicePeaks

BENCH = REGISTRY.get("infer-engine")
BERT = {"model": "bert-tiny", "config": "layers=1", "batch": 2, "seq": 8,
        "steps_per_window": 2}

# A device whose int8 peak is four times its fp32 peak, as on the GPUs in the peak table.
PEAKS = DevicePeaks("test device", dense={"fp32": 1.0, "int8": 4.0}, sparse={},
                    memory_tbs=None)


@pytest.fixture
def peaked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("accelbench.core.peaks.lookup", lambda device: PEAKS)


@pytest.mark.slow
@pytest.mark.parametrize(("engine", "peak"), [("int8", 4e12), ("eager", 1e12)])
def test_mfu_is_taken_against_the_peak_of_the_units_the_engine_runs_on(
        execute, peaked, engine, peak) -> None:
    m = execute(BENCH, engine=engine, **BERT)
    assert m.status == "ok", m.reason
    achieved = m.figure("model_flops").value
    assert m.figure("mfu").value == pytest.approx(100 * achieved / peak, rel=1e-6)
    assert m.details["mfu_peak"] == ("int8" if engine == "int8" else "fp32") + " dense peak"
