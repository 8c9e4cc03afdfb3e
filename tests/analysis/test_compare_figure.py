"""`compare --figure`: work per joule (or any other figure) between two runs, in the
direction the figure itself says is better; a case without it is listed as not compared."""

from __future__ import annotations

import json

import numpy as np
import pytest
from analysis_data import add_run, with_telemetry

from accelbench.analysis.compare import FASTER, INCONCLUSIVE, SAME, compare
from accelbench.analysis.select import select_group
from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.errors import EXIT_USAGE
from accelbench.store import Store

STACK = "AMD Instinct MI300X | ROCm 6.3 | PyTorch 2.6.0"
FLOP = 2 * 4096**3
COPY = 2 * 2**30
GEMM = Case.make("gemm", "g1", "micro", {"shape": "4096", "dtype": "bf16"}, "cuda:0")
MEMORY = Case.make("memory", "m1", "micro", {"op": "copy", "size_mib": 1024}, "cuda:0")


@pytest.fixture
def store(tmp_path):
    """Run A and run B of a GEMM at the same speed, B drawing 20% less power; the copy
    was measured with telemetry in A only. Each case in three processes, as the suites
    measure them."""
    path = tmp_path / "s.sqlite"
    rng = np.random.default_rng(1)
    with Store.open(path) as s:
        for i, (power, copy_power) in enumerate([(650.0, 400.0), (520.0, None)]):
            ms = [with_telemetry(GEMM, 1e-3, FLOP, "FLOP/s", rng=rng, power_w=power,
                                 processes=3),
                  with_telemetry(MEMORY, COPY / 4e12, COPY, "B/s", rng=rng, name="bandwidth",
                                 power_w=copy_power, processes=3)]
            add_run(s, host="n1", stack=STACK, started_at=1_700_000_000 + 3600 * i,
                    measurements=ms)
        runs = [r.id for r in reversed(s.list_runs())]
    return path, runs


def _compare(path, runs, **kwargs):
    with Store.open(path, create=False) as s:
        return compare(select_group(s, runs[0]), select_group(s, runs[1]), **kwargs)


def test_work_per_joule_is_compared_and_a_case_without_it_is_unpaired(store) -> None:
    path, runs = store
    c = _compare(path, runs, figure="throughput_per_joule")
    (case,) = c.cases
    assert case.label.startswith("gemm") and case.figure == "throughput_per_joule"
    assert case.unit == "FLOP/J" and case.higher_is_better
    assert case.ratio.ratio == pytest.approx(650 / 520, rel=0.01)  # same speed, less power
    assert case.verdict == FASTER
    (missing,) = c.figure_missing
    assert missing.label.startswith("memory")
    assert "no figure 'throughput_per_joule' in A" in missing.reason
    assert "bandwidth" in missing.reason  # what it has instead
    assert not c.not_measured and not c.only_a and not c.only_b


def test_a_glob_picks_each_cases_own_figure_and_a_case_without_telemetry_says_so(
        store, capsys) -> None:
    path, runs = store
    assert main(["compare", runs[0], runs[1], "--store", str(path), "--figure", "*_PER_JOULE",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["figure"] == "*_PER_JOULE"
    (case,) = data["cases"]
    assert case["figure"] == "throughput_per_joule" and case["verdict"] == FASTER
    (missing,) = data["figure_missing"]
    # The copy has bandwidth_per_joule in A, but none in B, measured without telemetry.
    assert "no figure '*_PER_JOULE' in B (its figures: bandwidth, time)" in missing["reason"]

    assert main(["compare", runs[0], runs[1], "--store", str(path),
                 "--figure", "*_per_joule"]) == 0
    out = capsys.readouterr().out
    assert "throughput_per_joule" in out and "Not compared" in out and "+ is better" in out
    assert "better" in out.split("Not compared")[0].split("B/A: ratio")[0]  # the verdict


def test_a_lower_is_better_figure_is_better_when_lower(store) -> None:
    path, runs = store
    (case,) = _compare(path, runs, figure="energy_per_call").cases
    assert not case.higher_is_better and case.unit == "J"
    assert case.ratio.ratio == pytest.approx(520 / 650, rel=0.01)
    assert case.change == pytest.approx(650 / 520 - 1, rel=0.02) and case.verdict == FASTER


def test_a_figure_stated_once_per_measurement_is_inconclusive_from_one_run(store) -> None:
    path, runs = store
    c = _compare(path, runs, figure="power")
    (case,), (copy,) = c.cases, c.figure_missing
    assert case.a.values.size == 1 and case.ratio.ratio == pytest.approx(0.8, rel=0.01)
    assert not case.test.significant and case.verdict == INCONCLUSIVE
    assert case.reason.startswith("too few processes (1 and 1)")
    assert copy.label.startswith("memory")


def test_without_the_option_the_headline_figure_is_compared_as_before(store) -> None:
    path, runs = store
    c = _compare(path, runs)
    assert [case.figure for case in c.cases] == ["throughput", "bandwidth"]
    assert c.figure is None and not c.figure_missing
    assert all(case.verdict == SAME for case in c.cases)  # the speeds are the same


def test_a_figure_no_case_has_is_refused_in_one_line(store, capsys) -> None:
    path, runs = store
    assert main(["compare", runs[0], runs[1], "--store", str(path),
                 "--figure", "througput_per_joule"]) == EXIT_USAGE
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "no measured case has a figure matching --figure 'througput_per_joule'" in line
    assert "throughput_per_joule" in line  # the figures there are
