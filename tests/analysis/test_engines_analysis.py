"""Engines side by side: pairing with eager in the same run, speed-up with its interval."""

from __future__ import annotations

import numpy as np
import pytest

from accelbench.analysis.significance import ratio_of_medians
from accelbench.analysis.values import case_mode
from accelbench.benchmarks.models.engines.groups import engine_groups, speedup
from accelbench.core.case import Case
from accelbench.core.measurement import Figure
from fakes import stored_measurement

BASE = {"model": "bert-base", "dtype": "bf16", "batch": 8, "seq": 128, "provider": "",
        "ort_level": "", "int8": ""}


def _case(engine: str, **changes) -> Case:
    return Case.make("infer-engine", "v1", "model", {**BASE, "engine": engine, **changes},
                     "cuda:0")


def _m(engine: str, seconds: float, status: str = "ok", **changes):
    rng = np.random.default_rng(len(engine))
    samples = tuple(seconds * (1 + 0.01 * rng.standard_normal(12)))
    parity = {"max_abs": 1e-3, "max_rel": 1e-3, "cosine": 0.9999, "top1": 1.0,
              "tolerance": {"max_rel": 0.1, "cosine": 0.99, "top1": 0.7}, "ok": True}
    if status != "ok":
        return stored_measurement(_case(engine, **changes), status,
                                  reason="parity with eager fp32 failed: cosine 0.5 < 0.99")
    return stored_measurement(_case(engine, **changes), status, samples=samples,
                              figures=(Figure("throughput", 8 / seconds, "sample/s"),
                                       Figure("p50", seconds, "s", False)),
                              details={"parity": parity, "engine": engine})


def test_each_engine_pairs_with_the_eager_case_of_its_model_precision_and_batch() -> None:
    eager, compiled = _m("eager", 0.010), _m("compile", 0.005)
    other_batch = _m("onnxruntime", 0.004, batch=1)
    groups = engine_groups([eager, compiled, other_batch,
                            _m("onnxruntime", 0.0025, provider="migraphx")])
    assert [len(g.rows) for g in groups] == [3, 1]
    rows = {r.engine: r for r in groups[0].rows}
    assert set(rows) == {"eager", "compile", "onnxruntime provider=migraphx"}
    assert rows["eager"].speedup is None  # the reference itself
    s = rows["compile"].speedup
    expected = ratio_of_medians(compiled.samples, eager.samples)
    assert s == expected and s.ratio == pytest.approx(2.0, rel=0.02)
    assert s.low < s.ratio < s.high and s.method == "bootstrap"
    onnx = rows["onnxruntime provider=migraphx"].speedup
    assert onnx is not None and onnx.ratio == pytest.approx(4.0, rel=0.02)
    assert groups[1].rows[0].speedup is None  # no eager at batch 1 in this run
    assert dict(groups[0].shared)["batch"] == 8 and groups[0].model == "bert-base"


def test_a_failed_engine_has_no_speedup_and_a_group_with_nothing_measured_is_left_out() -> None:
    eager = _m("eager", 0.01)
    wrong = _m("int8", 0.001, status="failed", dtype="fp32")
    eager32 = _m("eager", 0.02, dtype="fp32")
    [_, group32] = engine_groups([eager, eager32, wrong])
    assert speedup(eager32, wrong) is None
    assert [r.speedup for r in group32.rows] == [None, None]
    assert engine_groups([_m("int8", 0.001, status="failed")]) == []


def test_engine_generate_and_serve_cases_are_inference() -> None:
    assert case_mode(_case("eager")) == "infer"
    for bench in ("generate", "serve"):
        assert case_mode(Case.make(bench, "v1", "model", {"model": "x"}, "cpu")) == "infer"
    assert case_mode(Case.make("train", "v1", "model", {"model": "x"}, "cpu")) == "train"
