"""Scaling efficiency of the training-at-scale benchmarks from stored runs: the series, the
efficiency and its interval against hand-computed figures, weak and strong labels, what
drags the scaling (a slow node, rank or link), the chart and `accelbench scaling`."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import t as student_t

from accelbench.analysis.select import select_runs
from accelbench.benchmarks.isolate.verdict import MIN_SLOWNESS
from accelbench.benchmarks.scale.scaling import (
    IDEAL,
    STATED,
    configuration,
    judge_ranks,
    scaling,
)
from accelbench.benchmarks.scale.view import chart, table
from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.core.measurement import Measurement, Rate
from accelbench.core.timing import Timing
from accelbench.errors import EXIT_USAGE, UserError
from accelbench.store import Store

sys.path.insert(0, str(Path(__file__).parents[1] / "analysis"))
from analysis_data import add_run

STACK = "NVIDIA H100 80GB HBM3 | CUDA 12.4 | PyTorch 2.4.0"
SEQ = 128
PER_RANK = 1000.0  # token/s of one rank alone
FSDP_EFFICIENCY = {1: 1.0, 2: 0.95, 4: 0.9, 8: 0.8, 16: 0.7}
FACTORS = (1.0, 1.03, 0.97)  # each worker process's time against the point's level
SLOW_NODE = "n3"
TP_THROUGHPUT = {2: 1800.0, 4: 3000.0}  # strong scaling: efficiency at 4 = 3000 / (2 x 1800)
# Relative offsets of a process's samples: their mean is the process's level exactly.
OFFSETS = (-2, -1, 0, 1, 2, -1, 0, 1, 0, 0)


# -- synthetic measurements ---------------------------------------------------------------


def scale_case(bench: str, world: int, **params: Any) -> Case:
    return Case.make(bench, "s1", "scale",
                     {"model": "llama-tiny", "dtype": "bf16", "batch": 4, "global_batch": 0,
                      "seq": SEQ, "backend": "nccl", "world_size": world, **params}, "cuda:0")


def rank_times(rank_nodes: list[str], *, solo: float = 0.1, comm: float = 0.02,
               slow_solo: dict[str, float] | None = None,
               slow_comm: dict[str, float] | None = None,
               slow_rank: dict[int, float] | None = None) -> dict[str, Any]:
    """Per-rank times with a small even jitter; a node of `slow_solo` (`slow_comm`) has
    its ranks' solo (communication) time times the factor, a rank of `slow_rank` too."""
    solos, steps = [], []
    for rank, node in enumerate(rank_nodes):
        jitter = 1.0 + 0.002 * ((rank * 7) % 5 - 2)
        s = solo * jitter * (slow_solo or {}).get(node, 1.0) * (slow_rank or {}).get(rank, 1.0)
        c = comm * jitter * (slow_comm or {}).get(node, 1.0)
        solos.append(s)
        steps.append(s + c)
    return {"rank_nodes": rank_nodes, "rank_solo_s": solos, "rank_step_s": steps}


def nodes_of(world: int, per_node: int) -> list[str]:
    return [f"n{rank // per_node + 1}" for rank in range(world)]


def details(world: int, rank_nodes: list[str], scaling_kind: str, form: str = "fsdp",
            **times: Any) -> dict[str, Any]:
    dp = world if form == "fsdp" else 1
    tp = world if form == "tp" else 1
    return {"world_size": world, "nodes": len(set(rank_nodes)), "scaling": scaling_kind,
            "parallel": {"form": form, "dp": dp, "tp": tp, "pp": 1},
            **rank_times(rank_nodes, **times)}


def measured(case: Case, tokens_per_s: float, tokens_per_call: float, info: dict[str, Any],
             factors: tuple[float, ...] = FACTORS) -> Measurement:
    """A measurement as the harness stores a model case: each process's samples around
    its level (seconds per call at `tokens_per_s`, times its factor), rates over the mean."""
    level = tokens_per_call / tokens_per_s
    timings = tuple(
        Timing(tuple(level * f * (1 + 0.01 * d) for d in OFFSETS), 10, 0, "converged", 0.95)
        for f in factors)
    rates = (Rate("throughput", tokens_per_call / SEQ, "sample/s", over="mean"),
             Rate("tokens", tokens_per_call, "token/s", over="mean"),
             Rate("model_flops", 6e9 * tokens_per_call, "FLOP/s", over="mean"),
             Rate("tokens_per_device", tokens_per_call / info["world_size"], "token/s",
                  over="mean"))
    return Measurement(case, "ok", timings=timings, rates=rates, details=info)


def fsdp_point(world: int, efficiency: float | None = None) -> Measurement:
    per_node = 4
    rank_nodes = nodes_of(world, per_node) if world > per_node else ["n1"] * world
    slow = {SLOW_NODE: 1.4} if world == 16 else None
    eff = FSDP_EFFICIENCY[world] if efficiency is None else efficiency
    return measured(scale_case("train-fsdp", world), world * PER_RANK * eff,
                    world * 4 * SEQ * 2, details(world, rank_nodes, "weak", slow_solo=slow))


def tp_point(world: int) -> Measurement:
    info = details(world, ["n1"] * world, "strong", form="tp")
    return measured(scale_case("train-tp", world, global_batch=16), TP_THROUGHPUT[world],
                    16 * SEQ * 2, info, factors=(1.0,))


def build_store(path: Path) -> Path:
    with Store.open(path) as store:
        at = 1.75e9
        # An older run at 2 ranks, slower: the newest at each world size is taken.
        add_run(store, host="n1", stack=STACK, started_at=at,
                measurements=[fsdp_point(2, efficiency=0.5)])
        for i, world in enumerate(sorted(FSDP_EFFICIENCY)):
            add_run(store, host="n1", stack=STACK, started_at=at + 600 * (i + 1),
                    measurements=[fsdp_point(world)])
        add_run(store, host="n1", stack=STACK, started_at=at + 9000,
                measurements=[tp_point(2), tp_point(4)])
        # Not a scaling benchmark: left out.
        gemm = Case.make("gemm", "g1", "micro", {"shape": "4096", "dtype": "bf16"}, "cuda:0")
        add_run(store, host="n1", stack=STACK, started_at=at + 9600,
                measurements=[measured(gemm, 1e12, 1e9, {"world_size": 1})])
    return path


@pytest.fixture(scope="module")
def scale_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("scale") / "scale.sqlite")


@pytest.fixture(scope="module")
def result(scale_store: Path):
    with Store.open(scale_store, create=False) as store:
        return scaling(select_runs(store, []))


def _series(result, bench: str):
    return next(s for s in result.series if s.benchmark == bench)


# -- efficiency and its interval ----------------------------------------------------------


def test_configurations_group_without_world_size_backend_and_threads() -> None:
    a = scale_case("train-fsdp", 2, threads=8)
    b = Case.make("train-fsdp", "s1", "scale", {**a.param_dict, "world_size": 16,
                                                "backend": "gloo", "threads": 4}, "cuda:3")
    assert configuration(a) == configuration(b)
    assert configuration(a) != configuration(scale_case("train-fsdp", 2, dtype="fp32"))


def test_one_series_per_configuration_smallest_world_size_first(result) -> None:
    assert {s.benchmark for s in result.series} == {"train-fsdp", "train-tp"}
    fsdp = _series(result, "train-fsdp")
    assert [p.world_size for p in fsdp.points] == [1, 2, 4, 8, 16]
    assert fsdp.figure == "tokens" and fsdp.unit == "token/s"
    assert fsdp.baseline_world_size == 1 and fsdp.generation == STACK
    # The baseline at 1 rank needs no note.
    assert not any("baseline" in n for n in fsdp.notes)


def test_efficiency_and_interval_from_the_process_values(result) -> None:
    """Efficiency = T(N) / (N x T(1)); its interval is Welch's t on the log values of the
    three processes a side, divided by N: computed here from the definitions."""
    fsdp = _series(result, "train-fsdp")
    logs = np.log([PER_RANK / f for f in FACTORS])  # the same spread on every side
    var = float(np.var(logs, ddof=1)) / len(FACTORS)  # of each side's mean
    se = math.sqrt(2 * var)
    df = (2 * var) ** 2 / (2 * var**2 / (len(FACTORS) - 1))  # Welch-Satterthwaite: 4
    half = float(student_t.ppf(0.975, df)) * se
    for p in fsdp.points[1:]:
        n = p.world_size
        want = FSDP_EFFICIENCY[n]
        assert p.efficiency.ratio == pytest.approx(want, rel=1e-9)
        assert p.efficiency.low == pytest.approx(want * math.exp(-half), rel=1e-6)
        assert p.efficiency.high == pytest.approx(want * math.exp(half), rel=1e-6)
        assert p.speedup.ratio == pytest.approx(n * want, rel=1e-9)
        assert p.speedup.low == pytest.approx(n * want * math.exp(-half), rel=1e-6)
        assert p.lost == pytest.approx(1 - want, abs=1e-9)
        assert p.lost_ci == pytest.approx((1 - p.efficiency.high, 1 - p.efficiency.low))
        # The throughput is the point's own tokens figure, as the store keeps it.
        gm = math.exp(np.mean(np.log(FACTORS)))
        assert p.value == pytest.approx(n * PER_RANK * want / gm, rel=1e-9)
        assert p.ci[0] < p.value < p.ci[1]
    base = fsdp.points[0]
    assert (base.efficiency.ratio, base.efficiency.low, base.efficiency.high) == (1, 1, 1)


def test_newest_measurement_at_a_world_size_is_taken(result) -> None:
    two = _series(result, "train-fsdp").points[1]
    assert two.runs_at_size == 2
    assert two.efficiency.ratio == pytest.approx(0.95)  # not the older run's 0.5


def test_weak_and_strong_scaling_are_labelled(result) -> None:
    assert _series(result, "train-fsdp").scaling == "weak"
    assert {p.scaling for p in _series(result, "train-fsdp").points} == {"weak"}
    assert _series(result, "train-tp").scaling == "strong"


def test_a_baseline_above_one_rank_is_noted_and_one_process_a_side_uses_stated_intervals(
        result, scale_store: Path) -> None:
    tp = _series(result, "train-tp")
    assert tp.baseline_world_size == 2
    assert any("baseline 2 ranks, not 1" in n for n in tp.notes)
    four = tp.points[1]
    assert four.efficiency.ratio == pytest.approx(3000 / (2 * 1800), rel=1e-9)
    # One process a side: [low(4) / high(2), high(4) / low(2)], times 2 / 4, from the
    # figures' stated intervals as stored.
    m2, m4 = tp_point(2).figure("tokens"), tp_point(4).figure("tokens")
    assert m2 is not None and m4 is not None
    assert m2.low is not None and m2.high is not None
    assert m4.low is not None and m4.high is not None
    assert four.efficiency.method == STATED
    assert four.efficiency.low == pytest.approx(m4.low / m2.high * 2 / 4, rel=1e-9)
    assert four.efficiency.high == pytest.approx(m4.high / m2.low * 2 / 4, rel=1e-9)
    assert four.efficiency.low < four.efficiency.ratio < four.efficiency.high


def test_nodes_and_ranks_per_node(result) -> None:
    points = {p.world_size: p for p in _series(result, "train-fsdp").points}
    assert (points[4].nodes, points[4].ranks_per_node) == (1, (4,))
    assert (points[16].nodes, points[16].ranks_per_node, points[16].ranks_text) == (
        4, (4, 4, 4, 4), "4")
    assert points[16].parallel == {"form": "fsdp", "dp": 16, "tp": 1, "pp": 1}


def test_another_benchmark_version_is_not_normalised() -> None:
    base = fsdp_point(1)
    newer = fsdp_point(2)
    newer = Measurement(Case.make("train-fsdp", "s2", "scale", newer.case.param_dict,
                                  "cuda:0"), "ok", timings=newer.timings, rates=newer.rates,
                        details=newer.details)
    res = scaling([_stored("r1", [base]), _stored("r2", [newer])])
    (series,) = res.series
    assert series.points[1].efficiency is None
    assert "version differs" in series.points[1].notes[0]


def _stored(run_id: str, ms: list[Measurement]):
    from accelbench.store import RunRecord, StoredRun

    record = RunRecord(run_id, 1.7e9 + int(run_id[1:]), None, "complete", None, (), "cuda:0",
                       STACK, "n1", "0.1.0", "fp", len(ms), 0, 0)
    return StoredRun(record, {}, tuple(ms))


# -- what drags ---------------------------------------------------------------------------


def test_a_slow_node_in_compute_is_named_on_four_nodes(result) -> None:
    info = rank_times(nodes_of(16, 4), slow_solo={SLOW_NODE: 1.4})
    drags, notes = judge_ranks(info, 16)
    (drag,) = drags
    assert (drag.what, drag.cause, drag.name) == ("node", "compute", SLOW_NODE)
    assert drag.slowness == pytest.approx(1.4, rel=0.01) and drag.slowness >= MIN_SLOWNESS
    assert not notes
    # And through the whole analysis: the 16-rank point names it.
    sixteen = _series(result, "train-fsdp").points[-1]
    assert [d.name for d in sixteen.drags] == [SLOW_NODE]


def test_a_slow_link_is_not_named_from_step_times_and_isolate_is_pointed_to() -> None:
    # The ranks of a synchronous step wait for one another: a node whose step minus solo
    # time is longest is not behind a slow link, so nothing is named from it.
    info = rank_times(nodes_of(16, 4), slow_comm={"n2": 2.0})
    drags, notes = judge_ranks(info, 16)
    assert drags == ()
    assert any("accelbench isolate" in n and "across 4 nodes" in n for n in notes)
    # A slow node in compute is named, and then no note is needed.
    both = rank_times(nodes_of(16, 4), slow_solo={"n1": 1.5}, slow_comm={"n2": 2.0})
    drags, notes = judge_ranks(both, 16)
    assert [(d.what, d.name) for d in drags] == [("node", "n1")] and not notes


def test_a_slow_rank_within_a_node_is_named() -> None:
    info = rank_times(["n1"] * 8, slow_rank={5: 1.5})
    (drag,) = judge_ranks(info, 8)[0]
    assert (drag.what, drag.name, drag.node) == ("rank", "rank 5", "n1")


def test_a_small_difference_is_not_named() -> None:
    # An outlier by its spread, but less than MIN_SLOWNESS slower: not named.
    info = rank_times(nodes_of(16, 4), slow_solo={"n2": 1.1})
    assert judge_ranks(info, 16)[0] == ()


def test_two_nodes_name_nothing_but_say_why() -> None:
    info = rank_times(nodes_of(4, 2), slow_solo={"n2": 1.6}, slow_comm={"n1": 3.0})
    drags, notes = judge_ranks(info, 4)
    assert drags == ()
    assert any(n.startswith("2 nodes: ") for n in notes)
    assert any("2 ranks on n1, n2" in n for n in notes)


def test_no_per_rank_times_is_said() -> None:
    drags, notes = judge_ranks({"world_size": 8}, 8)
    assert drags == () and "no per-rank" in notes[0]


# -- chart and table ----------------------------------------------------------------------


def test_chart_one_line_per_configuration_with_bands_tips_and_the_ideal(result) -> None:
    lines = chart(result)
    assert lines.logx
    names = [s.name for s in lines.series]
    assert names[-1] == IDEAL and len(names) == len(result.series) + 1
    ideal = lines.series[-1]
    assert list(ideal.y) == [1.0, 1.0] and list(ideal.x) == [1.0, 16.0]
    fsdp = next(s for s, r in zip(lines.series, result.series, strict=False)
                if r.benchmark == "train-fsdp")
    assert list(fsdp.x) == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert list(fsdp.y) == pytest.approx([FSDP_EFFICIENCY[n] for n in (1, 2, 4, 8, 16)])
    assert len(fsdp.band) == len(fsdp.tips) == 5
    assert all(low <= y <= high for (low, high), y in zip(fsdp.band, fsdp.y, strict=True))
    assert fsdp.band[3][0] < 0.8 < fsdp.band[3][1]
    assert "16 ranks on 4 node(s)" in fsdp.tips[-1] and SLOW_NODE in fsdp.tips[-1]


def test_table_rows_and_notes(result) -> None:
    t = table(result)
    assert len(t.rows) == 7
    row16 = next(r for r in t.rows if r[2] == "16")
    assert row16[1] == "weak" and row16[3] == "4" and row16[4] == "4"
    assert row16[8].startswith("0.700 [") and row16[9] == "30.0%"
    base = t.rows[0]
    assert base[2] == "1" and base[8] == "1 (baseline)" and base[9] == "-"
    assert SLOW_NODE in row16[10]
    assert any("2 nodes" in n for n in t.notes)


# -- the command --------------------------------------------------------------------------


def test_scaling_command_json_chart_and_table(scale_store: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["scaling", "--store", str(scale_store)]
    svg = tmp_path / "x.svg"
    assert main([*argv, "--json", "--chart", str(svg)]) == 0
    data = json.loads(capsys.readouterr().out)
    fsdp = next(s for s in data["series"] if s["benchmark"] == "train-fsdp")
    assert fsdp["scaling"] == "weak" and fsdp["baseline_world_size"] == 1
    eight = next(p for p in fsdp["points"] if p["world_size"] == 8)
    assert eight["efficiency"] == pytest.approx(0.8)
    assert eight["efficiency_ci"][0] < 0.8 < eight["efficiency_ci"][1]
    assert eight["lost"] == pytest.approx(0.2)
    assert fsdp["points"][-1]["drags"][0]["name"] == SLOW_NODE
    root = ET.fromstring(svg.read_text())
    assert root.tag.endswith("svg") and root.get("xmlns") is None  # parsed namespaced
    assert "{http://www.w3.org/2000/svg}" in root.tag
    titles = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert any("16 ranks on 4 node(s)" in t for t in titles)  # hover texts kept

    png = tmp_path / "x.png"
    assert main([*argv, "--bench", "train-tp", "--chart", str(png)]) == 0
    out = capsys.readouterr().out
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert "train-tp" in out or "strong" in out
    assert "train-fsdp" not in out


def test_scaling_command_errors_are_one_line(store_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    with Store.open(store_path):
        pass  # an empty store
    assert main(["scaling", "--store", str(store_path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no runs" in err
    with Store.open(store_path) as store:
        gemm = Case.make("gemm", "g1", "micro", {"shape": "4096"}, "cuda:0")
        add_run(store, host="n1", stack=STACK, started_at=1.7e9,
                measurements=[measured(gemm, 1e12, 1e9, {"world_size": 1})])
    assert main(["scaling", "--store", str(store_path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no measured case of train-fsdp" in err
    assert main(["scaling", "--store", str(store_path), "--bench", "nosuch"]) == EXIT_USAGE
    assert "unknown scaling benchmark" in capsys.readouterr().err
    with pytest.raises(UserError, match="no runs selected"):
        scaling([])


@pytest.mark.slow
def test_scaling_command_does_not_import_torch(scale_store: Path, tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from accelbench.cli.main import main\n"
        f"assert main(['scaling', '--store', {str(scale_store)!r}, '--chart', "
        f"{str(tmp_path / 'c.svg')!r}]) == 0\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


# -- a run's report -----------------------------------------------------------------------


def test_a_runs_report_has_a_row_per_case_and_the_series_it_measured() -> None:
    from accelbench.benchmarks.scale.view import sections

    points = [fsdp_point(world) for world in (1, 2, 4)]
    extra = {"parity": {"steps": 3, "worst_relative_difference": 2e-7, "tolerance": 1e-4,
                        "reference_layers": 1},
             "layers": 2, "memory_estimate": {"total": 3 * 2**30}}
    points[2] = Measurement(points[2].case, "ok", timings=points[2].timings,
                            rates=points[2].rates, details={**points[2].details, **extra})
    [section] = sections(points)
    assert section.key == "scale" and len(section.tables) == 2
    cases, series = section.tables
    assert len(cases.rows) == 3
    row = dict(zip(cases.header, cases.rows[2], strict=True))
    assert row["Form"] == "fsdp dp=4" and row["Ranks"] == "4"
    assert row["Loss parity"] == "2.0e-07 <= 0.0001 (3 steps, on 1 of 2 blocks)"
    assert row["Peak memory (estimate)"] == "- (3.00 GiB)"
    assert row["token/s per device"].endswith("token/s")
    assert [r[2] for r in series.rows] == ["1", "2", "4"]  # the efficiency table
    assert len(section.charts) == 1
    # One world size: the cases alone, no series to scale.
    [alone] = sections(points[:1])
    assert len(alone.tables) == 1 and not alone.charts
    assert sections([]) == []


def isolate_measurement(world: int, named: tuple[Any, ...]) -> Measurement:
    from accelbench.benchmarks.isolate.schedule import NODE
    from accelbench.benchmarks.isolate.verdict import Fabric, Verdict

    verdict = Verdict((Fabric("nodes", NODE, ("n1", "n2"), {}, named=named),))
    case = Case.make("isolate", "i1", "collective", {"backend": "nccl", "world_size": world},
                     "cuda:0")
    return Measurement(case, "ok", details={"verdict": verdict.to_dict()})


def test_what_isolate_named_in_the_same_run_is_given_with_the_point() -> None:
    from accelbench.benchmarks.isolate.verdict import Named
    from accelbench.benchmarks.scale.scaling import of_run

    slow_link = Named("link", "n1-n2", "p2p_bw", 1e9, 3e9, 3.0, 7.5)
    points = [fsdp_point(4), fsdp_point(8)]
    # Without isolate: two nodes cannot be told apart, and isolate is pointed to.
    [series] = of_run("r1", "", points).series
    eight = series.points[1]
    assert eight.isolated == () and any("accelbench isolate" in n for n in eight.notes)
    # With isolate on the same 8 ranks: its slow link, and no pointer left.
    [series] = of_run("r1", "", [*points, isolate_measurement(8, (slow_link,))]).series
    eight = series.points[1]
    assert eight.isolated == ("link n1-n2: send/recv bandwidth 3.00x slower (isolate)",)
    assert not any("accelbench isolate" in n for n in eight.notes)
    assert series.points[0].isolated == ()  # isolate ran on 8 ranks, not on 4
    row = table(of_run("r1", "", [*points, isolate_measurement(8, (slow_link,))])).rows[1]
    assert "link n1-n2" in row[-1]
    # An isolate that named nothing says so.
    [series] = of_run("r1", "", [*points, isolate_measurement(8, ())]).series
    assert any("isolate in the same run named no node or link (conclusive)" in n
               for n in series.points[1].notes)
