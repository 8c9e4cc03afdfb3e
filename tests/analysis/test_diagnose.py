"""Diagnosis rules and baselines on a synthetic 16-node fleet with two bad nodes."""

from __future__ import annotations

import json

import pytest
from analysis_data import BAD_NETWORK_NODE, FLEET_STACK, SLOW_GEMM_NODE, make_fleet

from accelbench.analysis import baseline as baselines
from accelbench.analysis.diagnose import diagnose
from accelbench.analysis.rules import load_rules, parse_rules
from accelbench.analysis.select import select_runs
from accelbench.cli.main import main
from accelbench.errors import EXIT_CASE_FAILED, EXIT_STORE, EXIT_USAGE, UserError
from accelbench.store import Store

RULES = """
version: 1
rules:
  - name: gemm
    metric: "gemm dtype=bf16"
    compare: ratio_to_baseline
    min: 0.95
    category: compute
  - name: allreduce-large
    metric: "collectives op=all-reduce bytes=268435456"
    figure: busbw
    compare: ratio_to_baseline
    min: 0.90
    category: network
  - name: allreduce-steady
    metric: "*"
    family: collective
    compare: cv
    max: 1e-1
    category: network
  - name: gemm-efficiency
    metric: gemm
    compare: pct_of_peak
    min: 40
    category: compute
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    path = tmp_path_factory.mktemp("fleet") / "results.sqlite"
    hosts = make_fleet(path)
    with Store.open(path) as store:
        runs = select_runs(store, [])
    return path, hosts, runs


def test_default_rules_find_exactly_the_two_bad_nodes(fleet) -> None:
    _, hosts, runs = fleet
    result = diagnose(runs, load_rules())
    assert len(result.nodes) == 16 == len(hosts)
    failing = {n.node: n for n in result.failing}
    assert set(failing) == {SLOW_GEMM_NODE, BAD_NETWORK_NODE}
    assert failing[SLOW_GEMM_NODE].categories == ["compute"]
    assert failing[BAD_NETWORK_NODE].categories == ["network"]
    gemm = [f for f in failing[SLOW_GEMM_NODE].findings if f.rule == "gemm-throughput"]
    assert len(gemm) == 2  # bf16 and fp16
    assert all(f.observed == pytest.approx(0.80, abs=0.03) for f in gemm)
    assert all(f.observed is not None and f.off_by == pytest.approx((0.90 - f.observed) / 0.90)
               for f in gemm)
    network = failing[BAD_NETWORK_NODE].findings
    assert {f.compare for f in network} == {"ratio_to_baseline", "cv"}
    assert all(n.checks > 0 for n in result.nodes)


def test_rules_from_yaml_with_every_comparison(fleet) -> None:
    _, _, runs = fleet
    result = diagnose(runs, parse_rules(RULES, "fleet.yaml"))
    failing = {n.node: {f.rule for f in n.findings} for n in result.failing}
    assert failing == {SLOW_GEMM_NODE: {"gemm"},
                       BAD_NETWORK_NODE: {"allreduce-large", "allreduce-steady"}}


def test_fleet_baseline_is_robust_to_the_bad_nodes(fleet) -> None:
    _, _, runs = fleet
    base = baselines.fleet_median(runs)
    gemm = next(c for c in base.cases.values() if c.label.startswith("gemm batch=1 dtype=bf16"))
    assert gemm.figures["throughput"].value == pytest.approx(700e12, rel=0.01)
    assert SLOW_GEMM_NODE in gemm.outliers and gemm.nodes == 16
    large = next(c for c in base.cases.values() if "bytes=268435456" in c.label)
    assert BAD_NETWORK_NODE in large.outliers
    assert large.figures["busbw"].value == pytest.approx(300e9 * 2**28 / (2**28 + 2**22),
                                                         rel=0.01)


def test_a_baseline_file_and_a_baseline_run_give_the_same_answer(fleet, tmp_path) -> None:
    _, _, runs = fleet
    path = tmp_path / "baseline.json"
    baselines.write_baseline(baselines.fleet_median(runs), path)
    loaded = baselines.read_baseline(path)
    assert loaded.generation_keys == (FLEET_STACK,) and len(loaded.cases) == 7
    from_file = diagnose(runs, load_rules(), loaded)
    healthy = next(r for r in runs if r.record.host == "node01")
    from_run = diagnose(runs, load_rules(), baselines.from_run(healthy))
    for result in (from_file, from_run):
        assert {n.node for n in result.failing} == {SLOW_GEMM_NODE, BAD_NETWORK_NODE}


def test_a_missing_or_failed_case_fails_the_status_rule(fleet) -> None:
    _, _, runs = fleet
    import dataclasses

    node = next(r for r in runs if r.record.host == "node03")
    first, *rest = node.measurements
    failed = dataclasses.replace(first, status="failed", reason="HIP error: out of memory")
    broken = dataclasses.replace(node, measurements=(failed, *rest[:-1]))
    fleet_runs = [broken if r is node else r for r in runs]
    result = diagnose(fleet_runs, load_rules())
    node3 = next(n for n in result.nodes if n.node == "node03")
    details = {f.detail for f in node3.findings if f.rule == "failed-case"}
    assert details == {"failed: HIP error: out of memory", "missing"}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("rules: [", "invalid YAML at line 2"),  # where the input ends
        ("- a\n- b\n", "expected a mapping with a 'rules' list"),
        ("rules: []", "non-empty list"),
        ("rulez: []\nrules: [{}]", "unknown top-level field 'rulez'"),
        ("rules:\n  - metric: gemm\n    compare: ratio_to_baseline\n    mni: 1\n"
         "    category: c\n", "unknown field 'mni'"),
        ("rules:\n  - metric: gemm\n    compare: eval\n    min: 1\n    category: c\n",
         "unknown compare 'eval'"),
        ("rules:\n  - metric: gemm\n    compare: value\n    min: __import__('os')\n"
         "    category: c\n", "'min' must be a number"),
        ("rules:\n  - metric: gemm\n    compare: value\n    min: true\n    category: c\n",
         "'min' must be a number"),
        ("rules:\n  - metric: gemm\n    compare: value\n    category: c\n",
         "give 'min', 'max' or 'max_cv'"),
        ("rules:\n  - metric: gemm\n    compare: value\n    min: 2\n    max: 1\n"
         "    category: c\n", "'min' (2.0) is above 'max'"),
        ("rules:\n  - compare: value\n    min: 2\n    category: c\n", "missing field 'metric'"),
        ("rules:\n  - metric: 'gemm dtype'\n    compare: value\n    min: 2\n    category: c\n",
         "bad case pattern"),
        ("rules:\n  - !!python/object/apply:os.system ['true']\n", "invalid YAML"),
    ],
)
def test_bad_rules_are_one_line_user_errors(text, fragment) -> None:
    with pytest.raises(UserError) as info:
        parse_rules(text, "rules.yaml")
    message = str(info.value)
    assert fragment in message and "\n" not in message and message.startswith("rules.yaml")


def test_baseline_files_are_checked(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    for content, fragment in [("{", "not JSON"), ('{"format": "x"}', "not an accelbench baseline"),
                              ('{"format": "accelbench-baseline", "format_version": 9}',
                               "format version 9"),
                              ('{"format": "accelbench-baseline", "format_version": 1}',
                               r"bad.json: \(top level\): missing field 'cases'")]:
        bad.write_text(content)
        with pytest.raises(UserError, match=fragment):
            baselines.read_baseline(bad)


def _set(data, path, value):
    *parents, last = path
    for part in parents:
        data = data[part]
    data[last] = value


# Values that parse but would switch a rule off or make its check meaningless.
BAD_BASELINE_VALUES = [
    (("cases", 2, "figures", 0, "value"), "nan", "'nan' is not a finite number above 0"),
    (("cases", 2, "figures", 0, "value"), float("nan"), "nan is not a finite number above 0"),
    (("cases", 2, "figures", 0, "value"), float("inf"), "inf is not a finite number above 0"),
    (("cases", 2, "figures", 0, "value"), 0, "0 is not a finite number above 0"),
    (("cases", 2, "figures", 0, "value"), -1, "-1 is not a finite number above 0"),
    (("cases", 2, "figures", 0, "value"), True, "True is not a finite number above 0"),
    (("cases", 2, "figures", 0, "higher_is_better"), "no", "'no' is not true or false"),
    (("cases", 2, "figures", 0, "spread"), -1.0, "-1.0 is not a finite number of at least 0"),
    (("cases", 2, "figures", 0, "spread"), float("nan"),
     "nan is not a finite number of at least 0"),
    (("cases", 2, "figures", 0, "pct_of_peak"), "70", "'70' is not a finite number or null"),
    (("cases", 2, "figures", 0, "unit"), 5, "5 is not a string"),
    (("cases", 2, "params"), ["dtype", "bf16"],
     "a list of 2 item(s) is not a mapping of parameter names to values"),
    (("cases", 2, "params", "dtype"), {"a": 1},
     "an object of 1 field(s) is not a string, a number, true, false or null"),
    (("cases", 2, "figures"), {"throughput": {}},
     "an object of 1 field(s) is not a list of figures"),
    (("cases", 2, "cv"), float("nan"), "nan is not a finite number of at least 0, or null"),
    (("cases", 2, "nodes"), 0, "0 is not a whole number of at least 1"),
    (("cases", 2, "label"), None, "None is not a string"),
    (("hosts",), "node01", "'node01' is not a list of strings"),
    (("cases", 2, "figures", 0, "valeu"), 1.0, "unknown field 'valeu'"),
]


@pytest.mark.parametrize(("path", "value", "message"), BAD_BASELINE_VALUES)
def test_a_baseline_value_that_would_switch_a_rule_off_is_refused(
        fleet, tmp_path, capsys, path, value, message) -> None:
    store, _, runs = fleet
    data = baselines.fleet_median(runs).to_dict()
    _set(data, path, value)
    bad = tmp_path / "base.json"
    bad.write_text(json.dumps(data))  # NaN and Infinity as JSON's extensions write them
    shown = path[:-1] if message.startswith("unknown field") else path  # its object's
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in shown).lstrip(".")
    with pytest.raises(UserError) as info:
        baselines.read_baseline(bad)
    assert str(info.value) == f"{bad}: {where}: {message}"
    assert info.value.exit_code == EXIT_USAGE
    # The command refuses it in one line, before any node is checked.
    assert main(["diagnose", "--store", str(store), "--baseline", str(bad)]) == EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.err == f"accelbench: error: {bad}: {where}: {message}\n"
    assert captured.out == ""


def test_a_baseline_holds_only_figures_a_ratio_to_means_something(fleet, tmp_path) -> None:
    """A figure of 0 or below in the runs is left out of the baseline, so a baseline that
    is written can always be read back."""
    import dataclasses

    from accelbench.core.case import Case
    from accelbench.core.measurement import Figure
    from fakes import stored_measurement

    _, _, runs = fleet
    case = Case.make("memory", "m1", "micro", {"op": "copy", "size_mib": 8}, "cpu")
    m = stored_measurement(case, samples=[1e-3] * 5, figures=(
        Figure("bandwidth", 0.0, "B/s", True), Figure("drift", -2.0, "s", False),
        Figure("latency", 3e-6, "s", False)))
    run = dataclasses.replace(runs[0], measurements=(*runs[0].measurements, m))
    for base in (baselines.from_run(run), baselines.fleet_median([run])):
        assert set(base.cases[case.key].figures) == {"latency"}
        path = tmp_path / "base.json"
        baselines.write_baseline(base, path)
        assert baselines.read_baseline(path).cases.keys() == base.cases.keys()


def test_diagnose_and_baseline_commands(fleet, tmp_path, capsys) -> None:
    path, _, _ = fleet
    store = ["--store", str(path)]
    assert main(["diagnose", *store]) == EXIT_CASE_FAILED
    out = capsys.readouterr().out
    assert "2 of 16 nodes fail: node05 (compute), node12 (network)" in out
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    assert main(["diagnose", *store, "--rules", str(rules), "--json"]) == EXIT_CASE_FAILED
    data = json.loads(capsys.readouterr().out)
    assert data["failing"] == [SLOW_GEMM_NODE, BAD_NETWORK_NODE]
    node5 = next(n for n in data["nodes"] if n["node"] == SLOW_GEMM_NODE)
    assert node5["findings"][0]["off_by_pct"] > 10
    out_file = tmp_path / "base.json"
    assert main(["baseline", *store, "-o", str(out_file), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["nodes"] == 16 and set(summary["outlier_nodes"]) >= {"node05", "node12"}
    assert main(["diagnose", *store, "--baseline", str(out_file)]) == EXIT_CASE_FAILED
    capsys.readouterr()
    # Only healthy nodes: everyone passes.
    healthy = [f"host=node0{i}" for i in (1, 2, 3, 4)]
    assert main(["diagnose", *store, *healthy]) == 0
    assert "all 4 nodes pass" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (["diagnose", "--rules", "/nonexistent/rules.yaml"], EXIT_USAGE, "cannot read rules"),
        (["diagnose", "--baseline", "nosuchrun"], EXIT_USAGE, "no run or stack matches"),
        (["baseline"], EXIT_USAGE, "required: -o"),
    ],
)
def test_diagnose_bad_input(fleet, capsys, args, code, fragment) -> None:
    path, _, _ = fleet
    assert main([*args, "--store", str(path)]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0]


def test_invalid_rules_file_on_the_command_line(fleet, tmp_path, capsys) -> None:
    path, _, _ = fleet
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - metric: gemm\n    compare: value\n  min: 1\n")
    assert main(["diagnose", "--rules", str(rules), "--store", str(path)]) == EXIT_USAGE
    assert "invalid YAML at line" in capsys.readouterr().err
    assert main(["diagnose", "--store", str(tmp_path / "none.sqlite")]) == EXIT_STORE


TYPO_RULES = RULES + """
  - name: gemm-typo
    metric: "gemmm"
    compare: ratio_to_baseline
    min: 0.95
    category: compute
"""


def test_a_rule_that_matches_nothing_is_an_error(fleet, tmp_path, capsys) -> None:
    path, _, runs = fleet
    rules = tmp_path / "rules.yaml"
    rules.write_text(TYPO_RULES)
    store = ["--store", str(path)]
    assert main(["diagnose", *store, "--rules", str(rules)]) == EXIT_USAGE
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "1 rule(s) match no measurement" in err[0] and "gemm-typo" in err[0]
    assert captured.out == ""
    with pytest.raises(UserError, match="gemm-typo"):
        diagnose(runs, parse_rules(TYPO_RULES), strict=True)


def test_allow_unmatched_warns_and_keeps_it_in_the_result(fleet, tmp_path, capsys) -> None:
    path, _, _ = fleet
    rules = tmp_path / "rules.yaml"
    rules.write_text(TYPO_RULES)
    args = ["diagnose", "--store", str(path), "--rules", str(rules), "--allow-unmatched"]
    assert main([*args, "--json"]) == EXIT_CASE_FAILED
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        "accelbench: warning: 1 rule(s) match no measurement in the selected runs: "
        "'gemm-typo'"]
    data = json.loads(captured.out)
    assert data["unmatched_rules"] == ["gemm-typo"]
    assert any("gemm-typo" in note for note in data["notes"])
    assert main(args) == EXIT_CASE_FAILED
    assert "match no measurement in the selected runs: 'gemm-typo'" in capsys.readouterr().out


def test_a_figure_glob_that_matches_no_figure_is_unmatched(fleet) -> None:
    _, _, runs = fleet
    text = RULES.replace("figure: busbw", "figure: bussbw")
    with pytest.raises(UserError, match="allreduce-large"):
        diagnose(runs, parse_rules(text), strict=True)


def test_default_rules_that_do_not_apply_to_a_cpu_node_are_only_noted(tmp_path, capsys) -> None:
    """A quick-suite-like CPU store: GEMM, memory and launch; no collectives, no models."""
    import numpy as np
    from analysis_data import add_run, rated

    from accelbench.core.case import Case

    rng = np.random.default_rng(0)
    path = tmp_path / "cpu.sqlite"
    cases = [(Case.make("gemm", "g", "micro", {"shape": "512", "dtype": "fp32"}, "cpu"), "FLOP/s"),
             (Case.make("memory", "m", "micro", {"op": "copy", "size_mib": 64}, "cpu"), "B/s"),
             (Case.make("launch", "l", "micro", {"mode": "eager"}, "cpu"), "")]
    with Store.open(path) as store:
        for host in ("cpu1", "cpu2", "cpu3"):
            ms = [rated(case, 1e-3, 1e6, unit, rng=rng) if unit else
                  rated(case, 5e-6, 1.0, "call/s", rng=rng) for case, unit in cases]
            add_run(store, host=host, stack="cpu | torch", started_at=1.7e9 + len(host),
                    measurements=ms, device="cpu")
    assert main(["diagnose", "--store", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    data = json.loads(captured.out)
    assert data["unmatched_rules"] == ["collective-bandwidth", "model-throughput"]
    assert data["failing"] == []
