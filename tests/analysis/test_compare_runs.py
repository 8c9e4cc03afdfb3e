"""`compare` on stored runs whose true differences are known: the committed corpus (one
process per case) and runs measured in three processes, as the suites measure them."""

from __future__ import annotations

import json

import pytest
from analysis_data import (
    CORPUS,
    NOISY_DTYPE,
    PROCESS_EFFECTS,
    corpus_store,
    process_pair,
)
from scipy import stats

from accelbench.analysis.compare import FASTER, INCONCLUSIVE, SAME, SLOWER, compare
from accelbench.analysis.select import parse_case_pattern, select_group
from accelbench.cli.main import main
from accelbench.errors import EXIT_CASE_FAILED, EXIT_INCONCLUSIVE, EXIT_USAGE
from accelbench.store import Store, load_json

# The corpus' MI250X run B differs from run A (same machine, new driver) by these
# effects; but each of its cases was measured in one process, and the store holds two
# runs of that stack: nothing tells its run-to-run noise, so no verdict can be honest.
CORPUS_EFFECTS = {
    "gemm batch=1 dtype=bf16 shape=4096": -0.10,
    "train batch=32 dtype=bf16 model=bert-base": 0.12,
    "collectives bytes=268435456 dtype=bf16 op=all-reduce reduce=sum": 0.08,
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


def test_one_process_a_side_is_inconclusive_whatever_the_samples_say(a_vs_b) -> None:
    assert a_vs_b.cases and all(c.verdict == INCONCLUSIVE for c in a_vs_b.cases)
    assert all(c.reason.startswith("too few processes (1 and 1)") for c in a_vs_b.cases)
    assert all(c.test.p_value is None and not c.test.significant for c in a_vs_b.cases)
    for label, change in CORPUS_EFFECTS.items():
        case = next(c for c in a_vs_b.cases if c.label == label)
        assert case.change == pytest.approx(change, abs=0.02)  # the estimate still shows
        assert case.speed.low == 0 and case.speed.high == float("inf")


def test_unpaired_cases_are_listed_with_why(a_vs_b) -> None:
    assert [u.label for u in a_vs_b.only_a] == ["gemm batch=1 dtype=fp32 shape=8192"]
    assert [u.label for u in a_vs_b.only_b] == ["train batch=8 dtype=bf16 model=gpt2"]
    (launch,) = a_vs_b.version_differs
    assert launch.label == "launch mode=eager"
    assert "version differs: l1 in A, l2 in B" in launch.reason
    assert all(not c.label.startswith("launch") for c in a_vs_b.cases)


def test_geometric_mean_per_family_is_scipys(a_vs_b) -> None:
    families = {f.family: f for f in a_vs_b.families}
    assert set(families) == {"micro", "models", "collectives"}
    for name, summary in families.items():
        speedups = [c.speed.ratio for c in a_vs_b.cases if c.family == name]
        assert summary.geomean == pytest.approx(stats.gmean(speedups))
    assert families["collectives"].geomean == pytest.approx(1.08, abs=0.03)


def test_time_figures_compare_as_speed(store_path) -> None:
    with Store.open(store_path, create=False) as store:
        mi250x_b = select_group(store, "20221115")
        h100 = select_group(store, "*H100*")
    (launch,) = compare(mi250x_b, h100, cases=parse_case_pattern("launch")).cases
    assert launch.figure == "latency" and not launch.higher_is_better
    assert launch.ratio.ratio == pytest.approx(3.0 / 4.5, rel=0.03)  # latency, B over A
    assert launch.speed.ratio == pytest.approx(4.5 / 3.0, rel=0.03)  # B is 1.5x as fast
    assert launch.verdict == INCONCLUSIVE and launch.change > 0


def test_stack_filters_pool_runs(store_path) -> None:
    with Store.open(store_path, create=False) as store:
        mi250x = select_group(store, "gen=*MI250X*")
        h100 = select_group(store, "*h100*")
    assert len(mi250x.runs) == 2 and len(h100.runs) == 1
    result = compare(mi250x, h100, min_effect=0.10)
    pooled = next(c for c in result.cases if c.label.startswith("memory"))
    assert pooled.a.processes == 2 and len(pooled.a.runs) == 2
    # Two runs on A: the spread of their figures is A's noise, and B borrows nothing.
    assert pooled.ratio.method.endswith("(runs)")
    failed = [u for u in result.not_measured + result.only_b if "fp8" in u.label]
    assert failed and "fp8" in failed[0].label


def test_the_gate_on_the_corpus_says_it_cannot_decide(store_path, capsys) -> None:
    argv = ["compare", "20221101", "20221115", "--store", str(store_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "inconclusive" in out and "Geometric mean" in out and "only in B" in out
    assert main([*argv, "--fail-on-regression", "5"]) == EXIT_INCONCLUSIVE
    out = capsys.readouterr().out
    assert "inconclusive:" in out and "may have regressed by 5% or more" in out
    assert "gemm batch=1 dtype=bf16 shape=4096: too few processes" in out
    assert main([*argv, "--json", "--fail-on-regression", "8"]) == EXIT_INCONCLUSIVE
    data = json.loads(capsys.readouterr().out)
    assert data["regressions"] == []
    assert {u["label"] for u in data["undecided"]} >= {"gemm batch=1 dtype=bf16 shape=4096"}
    assert data["verdicts"][INCONCLUSIVE] == len(data["cases"])
    assert {f["family"] for f in data["families"]} == {"micro", "models", "collectives"}
    assert data["version_differs"][0]["label"] == "launch mode=eager"


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    path = tmp_path_factory.mktemp("pair") / "pair.sqlite"
    a, b = process_pair(path)
    with Store.open(path, create=False) as store:
        result = compare(select_group(store, a), select_group(store, b))
    return path, a, b, result


EXPECTED = {  # from PROCESS_EFFECTS: 1% noise between processes, 12% for fp64
    "bf16": SLOWER,  # -10%
    "fp16": SAME,  # +3%: told from none, but below 5%
    "fp32": SAME,  # the whole interval within ±5%
    "fp8": FASTER,  # +12%
    "int8": SLOWER,  # -6%
    NOISY_DTYPE: INCONCLUSIVE,  # +8% with 12% between processes
}


def test_verdicts_from_process_values_match_the_known_effects(pair) -> None:
    _, _, _, result = pair
    verdicts = {c.b.case.param_dict["dtype"]: c for c in result.cases}
    for dtype, verdict in EXPECTED.items():
        assert verdicts[dtype].verdict == verdict, dtype
        assert verdicts[dtype].change == pytest.approx(PROCESS_EFFECTS[dtype] - 1, abs=0.03)
    assert verdicts["fp16"].below_min_effect
    bf16 = verdicts["bf16"]
    assert bf16.ratio.low < bf16.ratio.ratio < bf16.ratio.high < 0.95
    assert bf16.test.test == "welch-t on log process values" and bf16.test.p_value < 0.01
    assert bf16.a.processes == 3 and bf16.b.processes == 3
    noisy = verdicts[NOISY_DTYPE]
    assert noisy.reason.startswith("too few processes or runs for this noise")
    assert noisy.runs_needed is not None and noisy.runs_needed > 3
    assert result.verdict_counts == {FASTER: 1, SLOWER: 2, SAME: 2, INCONCLUSIVE: 1}


def test_each_side_shows_the_figure_and_interval_show_states(pair) -> None:
    path, a, _, result = pair
    with Store.open(path, create=False) as store:
        run = store.load_run(a)
    for case in result.cases:
        m = next(m for m in run.measurements if m.case.key == case.key)
        assert m.primary is not None and m.spread is not None
        assert case.a.median == m.primary.value
        assert case.a.median_ci() == (m.primary.low, m.primary.high)
        assert case.a.rel_half_width == m.spread.rel_half_width


def test_the_gate_fails_on_a_conclusive_regression_only(pair, capsys) -> None:
    path, a, b, _ = pair
    argv = ["compare", a, b, "--store", str(path)]
    assert main([*argv, "--fail-on-regression", "5"]) == EXIT_CASE_FAILED
    out = capsys.readouterr().out
    assert "2 case(s) regressed by 5% or more" in out
    assert main([*argv, "--fail-on-regression", "8", "--json"]) == EXIT_CASE_FAILED
    data = json.loads(capsys.readouterr().out)
    assert data["regressions"] == ["gemm batch=1 dtype=bf16 shape=4096"]
    # Nothing regressed by 12% or more; the noisy case might have, and the gate says so.
    assert main([*argv, "--fail-on-regression", "12"]) == EXIT_INCONCLUSIVE
    out = capsys.readouterr().out
    assert f"gemm batch=1 dtype={NOISY_DTYPE} shape=4096: too few processes" in out
    assert main([*argv, "--fail-on-regression", "12", "--case", "gemm dtype=bf16"]) == 0
    assert "no case regressed by 12% or more" in capsys.readouterr().out


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


def test_a_slower_case_of_two_runs_made_here_says_how_to_explain_it(pair, capsys,
                                                                    monkeypatch) -> None:
    path, a, b, _ = pair
    monkeypatch.setattr("accelbench.env.fingerprint.host_name", lambda: "mi300x-01")
    main(["compare", a, b, "--store", str(path)])
    out = capsys.readouterr().out
    assert f"Why it moved: accelbench explain {a} {b} --case " in out
    assert "'gemm batch=1 dtype=bf16 shape=4096'" in out  # the one that slowed most
    # Made on another host: explain profiles the case here, so it is not offered.
    monkeypatch.setattr("accelbench.env.fingerprint.host_name", lambda: "elsewhere")
    main(["compare", a, b, "--store", str(path)])
    assert "accelbench explain" not in capsys.readouterr().out
