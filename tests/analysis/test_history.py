"""History of a case over stored runs, with its change points, from a store of known steps."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from analysis_data import (
    HISTORY_IMPROVED_AT,
    HISTORY_REGRESSED_AT,
    HISTORY_STACK,
    add_run,
    make_history,
)

from accelbench.analysis.changepoints import points_needed
from accelbench.analysis.evidence import runs_needed
from accelbench.analysis.history import (
    CANNOT_TELL,
    CHANGED,
    IMPROVED,
    NO_CHANGE,
    REGRESSED,
    case_matcher,
    history,
)
from accelbench.analysis.select import select_runs
from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.core.measurement import Figure
from accelbench.errors import EXIT_CASE_FAILED, EXIT_INCONCLUSIVE, EXIT_USAGE, UserError
from accelbench.store import Store, StoredRun
from accelbench.store.records import RunRecord
from fakes import stored_measurement


@pytest.fixture(scope="module")
def history_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("history") / "results.sqlite"
    ids = make_history(path)
    with Store.open(path) as store:
        runs = select_runs(store, [])
    return path, ids, runs


def test_known_steps_are_found_and_described(history_store) -> None:
    _, ids, runs = history_store
    series = history(runs, case_matcher("gemm dtype=bf16"))
    assert series[0].generation_key == HISTORY_STACK
    main_series = series[0]
    assert len(main_series.points) == len(ids)
    improved, regressed = main_series.change_points
    assert (improved.kind, improved.index, improved.run_id) == (
        IMPROVED, HISTORY_IMPROVED_AT, ids[HISTORY_IMPROVED_AT])
    assert (regressed.kind, regressed.index) == (REGRESSED, HISTORY_REGRESSED_AT)
    assert improved.change == pytest.approx(0.08, abs=0.015)
    assert regressed.change == pytest.approx(-0.12, abs=0.015)
    assert regressed.describe().startswith("regressed by 1")
    assert regressed.describe().endswith(f"at run {ids[HISTORY_REGRESSED_AT]}")
    assert main_series.latest_regression is regressed


def test_other_stacks_make_their_own_series_and_flat_cases_have_no_change(history_store):
    _, _, runs = history_store
    series = history(runs, case_matcher("gemm"))
    assert len(series) == 2 and len(series[1].points) == 1
    flat = history(runs, case_matcher("memory op=copy"))
    assert len(flat) == 1 and flat[0].change_points == []


def test_stack_host_and_limit_filters(history_store) -> None:
    _, ids, runs = history_store
    only = history(runs, case_matcher("gemm"), stacks="*ROCm 6.2*", limit=10)
    assert len(only) == 1 and [p.run_id for p in only[0].points] == ids[-10:]
    with pytest.raises(UserError, match="no stored result"):
        history(runs, case_matcher("gemm"), hosts="other-*")


def test_a_larger_minimum_effect_hides_smaller_steps(history_store) -> None:
    _, _, runs = history_store
    (series, _) = history(runs, case_matcher("gemm"), min_effect=0.10)
    assert [c.kind for c in series.change_points] == [REGRESSED]
    assert series.small_steps == 1


def test_case_key_selects_one_case(history_store) -> None:
    _, _, runs = history_store
    key = runs[0].measurements[0].case.key
    assert all(s.case.key == key for s in history(runs, case_matcher(key)))


def test_history_command(history_store, capsys) -> None:
    path, ids, _ = history_store
    argv = ["history", "gemm dtype=bf16", "--store", str(path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "regressed by" in out and ids[HISTORY_REGRESSED_AT] in out
    assert main([*argv, "--fail-on-regression"]) == EXIT_CASE_FAILED
    capsys.readouterr()
    assert main([*argv, "--json", "--stack", "*6.2*"]) == 0
    data = json.loads(capsys.readouterr().out)
    (series,) = data["series"]
    assert [c["kind"] for c in series["change_points"]] == ["improved", "regressed"]
    assert data["ends_on_regression"]
    assert main(["history", "memory", "--store", str(path), "--fail-on-regression"]) == 0
    capsys.readouterr()
    assert main(["history", "gemm nonsense", "--store", str(path)]) == EXIT_USAGE
    assert "NAME=GLOB" in capsys.readouterr().err


# -- whether a series can tell a step at all --------------------------------------------

BUSY_HOST = {"format_version": 1, "contended": True,
             "reasons": ["1 other process busy: spin (pid 9, 100% CPU)"]}
QUIET_HOST = {"format_version": 1, "contended": False, "reasons": []}
# Eight runs on a busy host: 22-33 GFLOP/s, then 11-17 after a real 45% loss.
BUSY_GFLOPS = [22.0, 33.0, 25.0, 30.0, 15.0, 11.0, 17.0, 12.0]


def _gflops(values, busy=(), seed: int = 0) -> list[StoredRun]:
    """Runs of one CPU GEMM case, one figure each (GFLOP/s), `busy` the indices of those
    measured on a busy host."""
    case = Case.make("gemm", "g1", "micro", {"shape": "128", "dtype": "fp32"}, "cpu")
    runs = []
    for i, v in enumerate(values):
        started = 1.75e9 + 3600 * i
        figure = Figure("throughput", v * 1e9, "FLOP/s", True, None, v * 0.99e9, v * 1.01e9)
        m = stored_measurement(case, "ok", samples=(1e-3,) * 5, figures=(figure,),
                               hosts=(BUSY_HOST if i in busy else QUIET_HOST,),
                               started_at=started)
        record = RunRecord(id=f"run-{seed}-{i:02d}", started_at=started,
                           finished_at=started + 60, status="complete", suite="quick",
                           argv=("run",), device="cpu", generation_key="EPYC | CPU",
                           host="vm", accelbench_version="0.1.0", fingerprint_id="fp",
                           n_ok=1, n_failed=0, n_skipped=0)
        runs.append(StoredRun(record, {"format_version": 1, "platform": "cpu"}, (m,)))
    return runs


def _quiet_levels(levels, noise: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return [level * (1 + noise * float(rng.standard_normal())) for level in levels]


def test_a_busy_series_with_a_real_step_cannot_tell_and_never_says_no_change() -> None:
    runs = _gflops(BUSY_GFLOPS, busy=range(len(BUSY_GFLOPS)))
    (series,) = history(runs, runs[0].measurements[0].case.key)
    assert series.verdict == CANNOT_TELL
    assert series.change_points == []
    why = series.cannot_tell
    assert why is not None
    assert why.contended == tuple(r.record.id for r in runs)
    assert any("busy host" in r for r in why.reasons)
    assert any("too high" in r for r in why.reasons)
    # Estimated from the noise: far more runs a side than the four there are, or none.
    assert why.runs_needed is None or why.runs_needed > len(runs) // 2
    assert why.noise_of == "all runs"  # no quiet run to learn a quiet host's noise from
    text = why.describe()
    assert "quiet runs a side" in text and "5%" in text


def test_a_quiet_series_without_a_step_is_no_change() -> None:
    runs = _gflops(_quiet_levels([20.0] * 16, 0.01, seed=1))
    (series,) = history(runs, runs[0].measurements[0].case.key)
    assert series.verdict == NO_CHANGE and series.cannot_tell is None
    assert series.change_points == []


def test_a_quiet_series_with_the_same_step_finds_it() -> None:
    runs = _gflops(_quiet_levels([27.0] * 4 + [14.85] * 4, 0.01, seed=2))
    (series,) = history(runs, runs[0].measurements[0].case.key)
    assert series.verdict == CHANGED and series.cannot_tell is None
    (step,) = series.change_points
    assert (step.kind, step.index) == (REGRESSED, 4)
    assert step.change == pytest.approx(-0.45, abs=0.03)


def test_quiet_runs_too_noisy_for_the_minimum_effect_cannot_tell() -> None:
    runs = _gflops(_quiet_levels([20.0] * 8, 0.05, seed=3))
    (series,) = history(runs, runs[0].measurements[0].case.key)
    assert series.change_points == [] and series.verdict == CANNOT_TELL
    why = series.cannot_tell
    assert why is not None and why.contended == () and why.noise_of == "quiet runs"
    assert why.runs_needed is not None and why.runs_needed > 4
    detection = points_needed(why.noise, 0.05)
    assert detection is not None
    assert why.runs_needed == max(detection, runs_needed(why.noise ** 2, 0.05) or 0)


def test_a_newest_run_on_a_busy_host_cannot_tell_whether_the_level_moved() -> None:
    levels = [*_quiet_levels([20.0] * 15, 0.005, seed=4), 11.0]
    runs = _gflops(levels, busy={15})
    (series,) = history(runs, runs[0].measurements[0].case.key)
    assert series.verdict == CANNOT_TELL
    assert series.cannot_tell is not None and series.cannot_tell.contended == (
        runs[-1].record.id,)
    assert series.cannot_tell.noise_of == "quiet runs"
    # A busy run among quiet ones, not the newest, leaves the verdict to the quiet runs.
    levels = _quiet_levels([20.0] * 16, 0.005, seed=5)
    levels[7] = 11.0
    (series,) = history(_gflops(levels, busy={7}), runs[0].measurements[0].case.key)
    assert series.verdict == NO_CHANGE


def test_a_step_onto_busy_runs_only_is_not_a_regression() -> None:
    levels = _quiet_levels([20.0] * 10 + [12.0] * 4, 0.005, seed=6)
    runs = _gflops(levels, busy=range(10, 14))
    (series,) = history(runs, runs[0].measurements[0].case.key)
    assert series.change_points == [] and series.latest_regression is None
    assert series.verdict == CANNOT_TELL and series.unsure_steps == 1


def test_one_run_cannot_tell() -> None:
    runs = _gflops([20.0])
    (series,) = history(runs, runs[0].measurements[0].case.key)
    assert series.verdict == CANNOT_TELL
    assert series.cannot_tell is not None and "1 run" in series.cannot_tell.reasons[0]


def _store_of(path, values, busy=()) -> None:
    with Store.open(path) as store:
        for run in _gflops(values, busy):
            add_run(store, host="vm", stack="EPYC | CPU", started_at=run.record.started_at,
                    measurements=run.measurements, device="cpu")


def test_history_command_says_cannot_tell_and_its_gate_exits_inconclusive(tmp_path,
                                                                          capsys) -> None:
    path = tmp_path / "s.sqlite"
    _store_of(path, BUSY_GFLOPS, busy=range(len(BUSY_GFLOPS)))
    argv = ["history", "gemm", "--store", str(path)]
    assert main(argv) == 0  # a report, not a gate
    out = capsys.readouterr().out
    assert "cannot tell:" in out and "no change point" not in out
    assert "1 series: 0 changed, 0 no change, 1 cannot tell" in " ".join(out.split())
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (series,) = data["series"]
    assert series["verdict"] == "cannot tell"
    assert len(series["cannot_tell"]["contended"]) == len(BUSY_GFLOPS)
    assert "runs_needed" in series["cannot_tell"] and series["cannot_tell"]["reasons"]
    assert data["summary"] == {"series": 1, "changed": 0, "no_change": 0, "cannot_tell": 1,
                               "ends_on_regression": 0}
    assert main([*argv, "--fail-on-regression"]) == EXIT_INCONCLUSIVE
    assert "cannot tell" in capsys.readouterr().out
    # A quiet series with no step passes the gate.
    quiet = tmp_path / "quiet.sqlite"
    _store_of(quiet, _quiet_levels([20.0] * 16, 0.01, seed=1))
    assert main(["history", "gemm", "--store", str(quiet), "--fail-on-regression"]) == 0


def test_the_regressions_page_says_cannot_tell_rather_than_none() -> None:
    from accelbench.report.site.pages import case_series, regressions_page
    from accelbench.report.site.render import render_page

    busy = _gflops(BUSY_GFLOPS, busy=range(len(BUSY_GFLOPS)))
    page = regressions_page(case_series(busy, 0.05), 0.05)
    html = render_page(page)
    assert "Cannot tell for 1 case" in html
    assert ">none<" not in html
    assert busy[0].measurements[0].case.label in html
    quiet = _gflops(_quiet_levels([20.0] * 16, 0.01, seed=1))
    html = render_page(regressions_page(case_series(quiet, 0.05), 0.05))
    assert "Cannot tell" not in html


def _real_runs(store, count: int) -> None:
    """`count` runs of one tiny CPU GEMM case into `store`: one process each, a tenth of
    a second of sampling."""
    request = {"format": 2, "command": "run", "suite": "quick", "benches": ["gemm"],
               "overrides": {"shape": ["64"]}, "dtypes": ["fp32"], "device": "cpu",
               "timing": {"max_time": 0.1, "telemetry_interval": 0.0, "processes": 1},
               "threads": 1, "repeat": count, "no_report": True}
    path = store.parent / f"request-{count}.json"
    path.write_text(json.dumps(request))
    done = subprocess.run([sys.executable, "-m", "accelbench", "run", "--request", str(path),
                           "--quiet", "--store", str(store)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_real_runs_on_a_busy_host_cannot_tell(tmp_path) -> None:
    store = tmp_path / "results.sqlite"
    _real_runs(store, 2)
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        _real_runs(store, 2)
    finally:
        spinner.kill()
        spinner.wait()
    done = subprocess.run([sys.executable, "-m", "accelbench", "history", "gemm", "--json",
                           "--store", str(store)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (series,) = json.loads(done.stdout)["series"]
    assert len(series["points"]) == 4
    assert all(p["contended"] for p in series["points"][2:])  # the spinner was seen
    assert series["verdict"] == "cannot tell"
    assert any("busy host" in r for r in series["cannot_tell"]["reasons"])
    gate = subprocess.run([sys.executable, "-m", "accelbench", "history", "gemm",
                           "--fail-on-regression", "--store", str(store)],
                          capture_output=True, text=True, timeout=120)
    assert gate.returncode == EXIT_INCONCLUSIVE, gate.stderr
    assert "cannot tell:" in gate.stdout and "no change point" not in gate.stdout


def test_a_series_ending_on_a_regression_here_says_how_to_explain_it(history_store, capsys,
                                                                     monkeypatch) -> None:
    path, ids, runs = history_store
    host = next(p.host for s in history(runs, case_matcher("gemm dtype=bf16"))
                for p in s.points)
    argv = ["history", "gemm dtype=bf16", "--store", str(path), "--stack", "*6.2*"]
    monkeypatch.setattr("accelbench.env.fingerprint.host_name", lambda: host)
    main(argv)
    before, at = ids[HISTORY_REGRESSED_AT - 1], ids[HISTORY_REGRESSED_AT]
    assert f"Why it moved: accelbench explain {before} {at} --case " in capsys.readouterr().out
    monkeypatch.setattr("accelbench.env.fingerprint.host_name", lambda: "elsewhere")
    main(argv)
    assert "accelbench explain" not in capsys.readouterr().out
