"""`compare` on the committed corpus of stored runs, whose true differences are known."""

from __future__ import annotations

import json

import pytest
from analysis_data import CORPUS, corpus_store
from scipy import stats

from accelbench.analysis.compare import FASTER, SAME, SLOWER, compare
from accelbench.analysis.select import parse_case_pattern, select_group
from accelbench.cli.main import main
from accelbench.errors import EXIT_CASE_FAILED, EXIT_USAGE
from accelbench.store import Store, load_json

# The corpus' MI250X run B differs from run A (same machine, new driver) by these effects.
EXPECTED = {
    "gemm batch=1 dtype=bf16 shape=4096": SLOWER,  # -10%
    "gemm batch=1 dtype=fp16 shape=4096": SAME,  # +3%: significant but below 5%
    "gemm batch=1 dtype=fp32 shape=4096": SAME,
    "memory op=copy pinned=yes size_mib=256": SAME,
    "train batch=64 dtype=fp32 model=resnet50": SLOWER,  # -6%
    "train batch=32 dtype=bf16 model=bert-base": FASTER,  # +12%
    "collectives bytes=268435456 dtype=bf16 op=all-reduce reduce=sum": FASTER,  # +8%
}


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    return corpus_store(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def a_vs_b(store_path):
    with Store.open(store_path, create=False) as store:
        a = select_group(store, "20221101")
        b = select_group(store, "20221115")
    return compare(a, b)


@pytest.mark.slow
def test_the_corpus_loads_from_its_store_and_its_export_alike(store_path) -> None:
    exported = load_json(json.loads((CORPUS / "generations-v1.json").read_text()))
    with Store.open(store_path, create=False) as store:
        stored = [store.load_run(r.id) for r in reversed(store.list_runs())]
    assert stored == exported
    assert [r.record.generation_key for r in stored] == [
        "AMD Instinct MI100 | ROCm 4.2 | PyTorch 1.9.0",
        "AMD Instinct MI250X | ROCm 5.3 | PyTorch 1.12.1",
        "AMD Instinct MI250X | ROCm 5.3 | PyTorch 1.12.1",
        "NVIDIA H100 80GB HBM3 | CUDA 12.4 | PyTorch 2.4.0",
    ]


def test_verdicts_match_the_known_effects(a_vs_b) -> None:
    verdicts = {c.label: c.verdict for c in a_vs_b.cases}
    for label, verdict in EXPECTED.items():
        assert verdicts[label] == verdict, label
    fp16 = next(c for c in a_vs_b.cases if c.label.startswith("gemm batch=1 dtype=fp16"))
    assert fp16.test.significant and fp16.below_min_effect
    bf16 = next(c for c in a_vs_b.cases if c.label.startswith("gemm batch=1 dtype=bf16"))
    assert bf16.ratio.ratio == pytest.approx(0.90, abs=0.01)
    assert bf16.ratio.low < bf16.ratio.ratio < bf16.ratio.high
    assert bf16.change == pytest.approx(-0.10, abs=0.01)
    assert bf16.test.test == "mann-whitney" and bf16.test.p_value < 1e-6


def test_unpaired_cases_are_listed_with_why(a_vs_b) -> None:
    assert [u.label for u in a_vs_b.only_a] == ["gemm batch=1 dtype=fp32 shape=8192"]
    assert [u.label for u in a_vs_b.only_b] == ["train batch=8 dtype=bf16 model=gpt2"]
    (launch,) = a_vs_b.version_differs
    assert launch.label == "launch mode=eager"
    assert "version differs: l1 in A, l2 in B" in launch.reason
    assert all(not c.label.startswith("launch") for c in a_vs_b.cases)


def test_few_samples_use_the_interval_test(a_vs_b) -> None:
    gpt2 = [c for c in a_vs_b.cases if "model=gpt2" in c.label]
    assert gpt2 and all(c.test.test == "ci-overlap" for c in gpt2)
    assert all(c.ratio.method == "order statistics" for c in gpt2)


def test_geometric_mean_per_family_is_scipys(a_vs_b) -> None:
    families = {f.family: f for f in a_vs_b.families}
    assert set(families) == {"micro", "model", "collective"}
    for name, summary in families.items():
        speedups = [c.speed.ratio for c in a_vs_b.cases if c.family == name]
        assert summary.geomean == pytest.approx(stats.gmean(speedups))
    assert families["collective"].geomean == pytest.approx(1.08, abs=0.03)


def test_time_figures_compare_as_speed(store_path) -> None:
    with Store.open(store_path, create=False) as store:
        mi250x_b = select_group(store, "20221115")
        h100 = select_group(store, "*H100*")
    (launch,) = compare(mi250x_b, h100, cases=parse_case_pattern("launch")).cases
    assert launch.figure == "latency" and not launch.higher_is_better
    assert launch.ratio.ratio == pytest.approx(3.0 / 4.5, rel=0.03)  # latency, B over A
    assert launch.speed.ratio == pytest.approx(4.5 / 3.0, rel=0.03)  # B is 1.5x as fast
    assert launch.verdict == FASTER and launch.change > 0


def test_stack_filters_pool_runs(store_path) -> None:
    with Store.open(store_path, create=False) as store:
        mi250x = select_group(store, "gen=*MI250X*")
        h100 = select_group(store, "*h100*")
    assert len(mi250x.runs) == 2 and len(h100.runs) == 1
    result = compare(mi250x, h100, min_effect=0.10)
    pooled = next(c for c in result.cases if c.label.startswith("memory"))
    assert pooled.a.values.size == 40 and len(pooled.a.runs) == 2
    failed = [u for u in result.not_measured + result.only_b if "fp8" in u.label]
    assert failed and "fp8" in failed[0].label


def test_compare_command_table_json_and_gate(store_path, capsys) -> None:
    argv = ["compare", "20221101", "20221115", "--store", str(store_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "slower" in out and "Geometric mean" in out and "only in B" in out
    assert main([*argv, "--fail-on-regression", "5"]) == EXIT_CASE_FAILED
    assert "2 case(s) regressed by 5% or more" in capsys.readouterr().out
    assert main([*argv, "--fail-on-regression", "15"]) == 0
    capsys.readouterr()
    assert main([*argv, "--json", "--min-effect", "15", "--fail-on-regression", "8"]) == (
        EXIT_CASE_FAILED)
    data = json.loads(capsys.readouterr().out)
    verdicts = {c["label"]: c["verdict"] for c in data["cases"]}
    assert verdicts["gemm batch=1 dtype=bf16 shape=4096"] == SAME
    assert data["regressions"] == ["gemm batch=1 dtype=bf16 shape=4096"]
    assert {f["family"] for f in data["families"]} == {"micro", "model", "collective"}
    assert data["version_differs"][0]["label"] == "launch mode=eager"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["nosuchrun", "latest"], "no run or stack matches 'nosuchrun'"),
        (["2022", "latest"], "ambiguous"),
        (["latest", "latest", "--min-effect", "-1"], "--min-effect"),
        (["latest", "latest", "--alpha", "2"], "--alpha"),
        (["latest", "latest", "--case", "gemm dtype"], "bad case pattern"),
        (["host=x,bogus=1", "latest"], "bad run filter"),
    ],
)
def test_compare_bad_input_is_one_line(store_path, capsys, args, fragment) -> None:
    assert main(["compare", *args, "--store", str(store_path)]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("accelbench: error: ") and fragment in err[0]
