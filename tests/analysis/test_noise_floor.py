"""Run-to-run noise that one run cannot see: repeated runs of a case on one stack and host
teach it, `compare` puts it under each side's interval and says so, `history` shows it;
and `show`, `history` and `compare` state the same interval for the same run."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from analysis_data import FLEET_STACK, add_run, gemm_case, in_processes

from accelbench.analysis import floors
from accelbench.analysis.compare import INCONCLUSIVE, SLOWER, compare
from accelbench.analysis.select import select_group
from accelbench.cli.main import main
from accelbench.store import Store

FLOP = 2 * 4096**3


def _store(path, levels, *, process_noise=0.003, seed=21, host="n1", stack=FLEET_STACK,
           start=1.76e9):
    """One run per level (its speed), each case in three processes close together."""
    rng = np.random.default_rng(seed)
    ids = []
    with Store.open(path) as store:
        for i, level in enumerate(levels):
            m = in_processes(gemm_case(), FLOP / (100e12 * level), FLOP, "FLOP/s", rng=rng,
                             process_noise=process_noise)
            ids.append(add_run(store, host=host, stack=stack,
                               started_at=start + 3600 * i, measurements=[m]))
    return ids


def _compare(path, a, b):
    with Store.open(path, create=False) as store:
        pairs = store.measurements_for_cases([gemm_case().key])
        learned = floors.learn(pairs)
        return compare(select_group(store, a), select_group(store, b), floors=learned)


# Whole runs move by several percent while each run's processes agree within 0.3%.
RUN_LEVELS = [1.0, 0.93, 1.05, 0.97, 1.04, 0.95, 1.02, 0.92]


def test_repeated_runs_floor_a_comparison_that_one_run_would_call(tmp_path) -> None:
    two = tmp_path / "two.sqlite"
    a, b = _store(two, RUN_LEVELS[:2])
    (blind,) = _compare(two, a, b).cases
    assert blind.verdict == SLOWER and blind.floors == (None, None)  # 7% "slower"

    many = tmp_path / "many.sqlite"
    ids = _store(many, RUN_LEVELS)
    (case,) = _compare(many, ids[0], ids[1]).cases
    floor_a, floor_b = case.floors
    assert floor_a is not None and floor_a == floor_b and floor_a.runs == len(RUN_LEVELS)
    assert 0.03 < floor_a.rel_sd < 0.12
    assert case.verdict == INCONCLUSIVE and case.runs_needed is not None
    assert "floor" in case.ratio.method


def test_the_floor_is_learned_per_host_and_leaves_contended_runs_out(tmp_path) -> None:
    path = tmp_path / "s.sqlite"
    ids = _store(path, RUN_LEVELS, host="n1")
    other = _store(path, [1.0, 1.0], host="n2", seed=5)
    with Store.open(path, create=False) as store:
        learned = floors.learn(store.measurements_for_cases([gemm_case().key]))
    keys = {(host) for (_, _, host, _) in learned.floors}
    assert keys == {"n1"}  # two runs on n2 teach nothing
    assert ids and other


def test_a_stack_measured_once_takes_the_floor_of_its_hosts_other_stacks(tmp_path) -> None:
    """A new build, one run: its run-to-run noise is the host's, learned on the old one."""
    path = tmp_path / "s.sqlite"
    old = _store(path, RUN_LEVELS)
    (new,) = _store(path, [0.93], stack="AMD Instinct MI300X | ROCm 6.4 | PyTorch 2.7.0",
                    start=1.77e9, seed=3)
    result = _compare(path, old[0], new)
    (case,) = result.cases
    assert case.floors[0] is not None and case.floors[1] == case.floors[0]
    assert case.verdict == INCONCLUSIVE  # -7%, as the old stack moved between its runs
    with Store.open(path, create=False) as store:
        bare = compare(select_group(store, old[0]), select_group(store, new))
    assert bare.cases[0].verdict == SLOWER  # without the floors it would be called


def test_the_command_says_a_floor_was_used(tmp_path, capsys) -> None:
    path = tmp_path / "s.sqlite"
    ids = _store(path, RUN_LEVELS)
    argv = ["compare", ids[0], ids[1], "--store", str(path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "use the run-to-run noise of their repeated runs" in out
    assert main([*argv, "--json"]) == 0
    (case,) = json.loads(capsys.readouterr().out)["cases"]
    assert case["a"]["noise_floor"]["runs"] == len(RUN_LEVELS)
    assert case["verdict"] == INCONCLUSIVE and case["runs_needed"] >= 2


def test_history_shows_the_run_to_run_noise(tmp_path, capsys) -> None:
    path = tmp_path / "s.sqlite"
    _store(path, RUN_LEVELS)
    assert main(["history", "gemm", "--store", str(path), "--json"]) == 0
    (series,) = json.loads(capsys.readouterr().out)["series"]
    assert series["noise_floor"]["runs"] == len(RUN_LEVELS)
    assert series["change_points"] == []  # the runs move, but no step stands out
    assert main(["history", "gemm", "--store", str(path)]) == 0
    assert "run-to-run noise: ±" in capsys.readouterr().out


def test_a_real_step_is_still_found_above_the_noise(tmp_path, capsys) -> None:
    path = tmp_path / "s.sqlite"
    levels = [1.0, 0.99, 1.01, 1.0, 0.99, 1.01, 0.8, 0.79, 0.81, 0.8, 0.8, 0.79]
    _store(path, levels)
    assert main(["history", "gemm", "--store", str(path), "--json"]) == 0
    (series,) = json.loads(capsys.readouterr().out)["series"]
    (step,) = series["change_points"]
    assert step["index"] == 6 and step["kind"] == "regressed"


def _interval_of(text: str, label_start: str) -> str:
    line = next(ln for ln in text.splitlines() if label_start in ln)
    (found,) = re.findall(r"±\d+\.\d%", line)
    return str(found)


def test_show_history_and_compare_state_the_same_interval(tmp_path, capsys, wide) -> None:
    path = tmp_path / "s.sqlite"
    ids = _store(path, RUN_LEVELS[:3], process_noise=0.03)
    assert main(["show", ids[0], "--store", str(path)]) == 0
    shown = _interval_of(capsys.readouterr().out, "gemm")
    assert main(["history", "gemm", "--store", str(path)]) == 0
    history = _interval_of(capsys.readouterr().out, ids[0])
    assert main(["compare", ids[0], ids[1], "--store", str(path)]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "gemm" in ln)
    compared = re.findall(r"±\d+\.\d%", line)[0]  # A's
    assert shown == history == compared


@pytest.fixture
def wide(monkeypatch):
    """A terminal wide enough that no row wraps."""
    monkeypatch.setenv("COLUMNS", "250")


def test_a_figure_that_states_no_interval_has_none_in_every_output(tmp_path, capsys) -> None:
    """A latency percentile from LoadGen states no interval: show, history and compare
    say none, rather than a zero-wide one that would claim perfect precision."""
    from accelbench.core.case import Case
    from accelbench.core.measurement import Figure
    from fakes import stored_measurement

    path = tmp_path / "s.sqlite"
    case = Case.make("serve", "s1", "serving", {"scenario": "single-stream"}, "cpu")
    ids = []
    with Store.open(path) as store:
        for i, p90 in enumerate((3.1e-3, 3.2e-3)):
            m = stored_measurement(case, "ok", samples=(p90,), figures=(
                Figure("latency_p90", p90, "s", higher_is_better=False),))
            ids.append(add_run(store, host="vm", stack=FLEET_STACK,
                               started_at=1.76e9 + 60 * i, measurements=[m]))
    assert main(["show", ids[0], "--store", str(path), "--json"]) == 0
    (m,) = json.loads(capsys.readouterr().out)["runs"][0]["measurements"]
    assert m["figures"][0]["low"] is None and m["figures"][0]["high"] is None
    assert main(["history", "serve", "--store", str(path), "--json"]) == 0
    (series,) = json.loads(capsys.readouterr().out)["series"]
    assert [p["ci"] for p in series["points"]] == [None, None]
    assert main(["compare", ids[0], ids[1], "--store", str(path), "--json"]) == 0
    (compared,) = json.loads(capsys.readouterr().out)["cases"]
    assert compared["a"]["ci"] is None and compared["b"]["ci"] is None
