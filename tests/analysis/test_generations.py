"""Generations on the committed corpus: headline figures per stack, normalised."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from analysis_data import corpus_store

from accelbench.analysis.generations import generations, short_labels
from accelbench.analysis.select import select_runs
from accelbench.analysis.values import case_mode
from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.errors import EXIT_USAGE, UserError
from accelbench.store import Store

MI100 = "AMD Instinct MI100 | ROCm 4.2 | PyTorch 1.9.0"
MI250X = "AMD Instinct MI250X | ROCm 5.3 | PyTorch 1.12.1"
H100 = "NVIDIA H100 80GB HBM3 | CUDA 12.4 | PyTorch 2.4.0"


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    return corpus_store(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def runs(store_path):
    with Store.open(store_path, create=False) as store:
        return select_runs(store, [])


def _row(result, label, dtype):
    return next(r for r in result.rows if r.label == label and r.dtype == dtype)


def test_training_throughput_per_generation_normalised_to_the_oldest(runs) -> None:
    result = generations(runs)
    assert result.keys == [MI100, MI250X, H100] and result.baseline == MI100
    assert result.filters["family"] == "models" and result.filters["mode"] == "train"
    assert {r.case.benchmark for r in result.rows} == {"train"}  # not "infer"
    resnet = _row(result, "resnet50", "fp32")
    assert resnet.figure == "throughput" and resnet.unit == "sample/s"
    h100 = resnet.cells[H100].versus_baseline
    assert h100.ratio == pytest.approx(1500 / 350, rel=0.03)
    assert h100.low < h100.ratio < h100.high
    assert resnet.cells[MI100].versus_baseline.ratio == pytest.approx(1.0)
    # Both MI250X runs are taken: one value each (each case was measured in one process),
    # and the cell shows the median of their figures.
    mi250x = resnet.cells[MI250X].results
    assert mi250x.values.size == 2 and len(mi250x.runs) == 2
    assert mi250x.median == pytest.approx(np.median([f.value for f in mi250x.run_figures]))
    bf16 = _row(result, "resnet50", "bf16")
    assert MI100 not in bf16.cells and bf16.cells[H100].versus_baseline is None
    assert bf16.cells[H100].note == "no baseline"


def test_another_baseline_and_filters(runs) -> None:
    result = generations(runs, baseline="*mi250x*", models=["bert*"], dtypes=["bf16"])
    assert result.baseline == MI250X
    (row,) = result.rows
    assert row.label == "bert-base" and row.dtype == "bf16"
    versus = row.cells[H100].versus_baseline
    assert versus is not None and versus.ratio == pytest.approx(1500 / 531, rel=0.05)


def test_micro_benchmarks_and_version_changes(runs) -> None:
    result = generations(runs, family="micro", mode=None)
    launch = next(r for r in result.rows if r.case.benchmark == "launch")
    # The launch benchmark changed (l1 -> l2): H100 (l2) is not normalised to MI100 (l1).
    assert launch.cells[H100].versus_baseline is None
    assert "version differs" in launch.cells[H100].note


def test_short_labels_keep_what_tells_cases_apart() -> None:
    cases = [Case.make("model", "v", "models", {"model": m, "batch": b, "dtype": d,
                                              "mode": "train"}, "cpu")
             for m, b in (("resnet50", 64), ("gpt2", 8)) for d in ("fp16", "bf16")]
    assert short_labels(cases) == ["resnet50", "resnet50", "gpt2", "gpt2"]
    assert short_labels(cases, dtype=True) == ["resnet50 dtype=fp16", "resnet50 dtype=bf16",
                                               "gpt2 dtype=fp16", "gpt2 dtype=bf16"]


def test_mode_comes_from_a_parameter_or_the_benchmark_name() -> None:
    def case(bench, **params):
        return Case.make(bench, "v", "models", {"model": "m", **params}, "cpu")

    assert case_mode(case("train")) == "train" == case_mode(case("train-ddp"))
    assert case_mode(case("infer")) == "infer" == case_mode(case("model", mode="infer"))
    assert case_mode(Case.make("gemm", "v", "micro", {}, "cpu")) is None


def test_bad_baseline_is_a_user_error(runs) -> None:
    with pytest.raises(UserError, match="no generation matches"):
        generations(runs, baseline="*TPU*")
    with pytest.raises(UserError, match="matches 2 generations"):
        generations(runs, baseline="AMD*")


@pytest.mark.slow
def test_generations_command_json_and_chart(store_path, tmp_path, capsys) -> None:
    chart = tmp_path / "generations.svg"
    argv = ["generations", "--store", str(store_path)]
    assert main([*argv, "--json", "--chart", str(chart), "--dtype", "fp16"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["baseline"] == MI100
    assert {r["dtype"] for r in data["rows"]} == {"fp16"}
    root = ET.fromstring(chart.read_text())
    assert root.tag.endswith("svg") and len(root.findall(".//{*}path")) > 10
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "resnet50" in out and "1.00x" in out
    assert main([*argv, "--family", "nosuch"]) == EXIT_USAGE
    assert main([*argv, "--model", "nosuch"]) == EXIT_USAGE
    assert "no measured case" in capsys.readouterr().err
