"""Each GPU's history across the nodes it was in (analysis.gpu_history, `accelbench
diagnose --by-gpu`): a GPU that moves keeps one series, a fall of its figure is a change
point naming its serial, a case on several ranks belongs to every GPU it used, and a case
that measured every GPU of its node gives each GPU its own figure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from analysis_data import gemm_case, rated

from accelbench.analysis.gpu_history import PER_GPU, devices_of, load_histories
from accelbench.analysis.history import REGRESSED
from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.core.measurement import Figure, Measurement
from accelbench.store import Store
from fakes import stored_measurement

STACK = "NVIDIA H100 80GB HBM3 | CUDA 12.4 | PyTorch 2.5.1"
MOVER = "1654923001005"  # in node-a for 12 runs, then in node-b; 18% slower from run 16
STAYER = "1654923001001"  # in node-a throughout, steady
DAY = 86400.0
START = 1.79e9
FLOP = 2 * 4096**3


def _gpu(index: int, serial: str) -> dict[str, Any]:
    return {"index": index, "key": serial, "uuid": f"GPU-{serial}", "serial": serial,
            "bus_id": f"0000:{24 + index:02x}:00.0", "product": "NVIDIA H100 80GB HBM3"}


def _add(store: Store, host: str, serials: list[str], started_at: float,
         measurements: list[Measurement], device: str = "cuda:0") -> str:
    fingerprint = {"format_version": 1, "platform": "cuda", "host": {"hostname": host},
                   "device": {"name": "NVIDIA H100 80GB HBM3", "type": "cuda"},
                   "gpus": [_gpu(i, s) for i, s in enumerate(serials)]}
    run_id = store.begin_run(fingerprint=fingerprint, fingerprint_id=f"fp-{host}-{serials[-1]}",
                             generation_key=STACK, device=device, suite="quick",
                             argv=["run"], host=host, accelbench_version="0.1.0",
                             started_at=started_at)
    for m in measurements:
        store.add_measurement(run_id, m)
    store.finish_run(run_id, "complete", finished_at=started_at + 60)
    return run_id


def _on(index: int) -> Case:
    return Case.make("gemm", "g1", "micro", {"shape": "4096", "dtype": "bf16", "batch": 1},
                     f"cuda:{index}")


def make_moves(path: Path, seed: int = 5) -> None:
    """24 nights, a run per GPU (each run measures one device, as `--device cuda:N` does):
    node-a holds STAYER (device 0) and MOVER (device 1) for 12 nights; then MOVER is in
    node-b (device 0) and another GPU takes its place in node-a. MOVER's GEMM falls 18%
    on night 16, in node-b."""
    rng = np.random.default_rng(seed)
    with Store.open(path) as store:
        for i in range(24):
            at = START + i * DAY
            level = 0.82 if i >= 16 else 1.0
            mover_index = 1 if i < 12 else 0
            mover = rated(_on(mover_index), FLOP / (500e12 * level), FLOP, "FLOP/s", rng=rng)
            steady = rated(_on(0), FLOP / 500e12, FLOP, "FLOP/s", rng=rng)
            node_a = [STAYER, MOVER if i < 12 else "1654923001009"]
            _add(store, "node-a", node_a, at, [steady])
            if i < 12:
                _add(store, "node-a", node_a, at + 60, [mover], device="cuda:1")
            else:
                other = rated(_on(1), FLOP / 500e12, FLOP, "FLOP/s", rng=rng)
                _add(store, "node-a", node_a, at + 60, [other], device="cuda:1")
                _add(store, "node-b", [MOVER], at + 120, [mover])


@pytest.fixture
def moves(tmp_path: Path) -> Path:
    path = tmp_path / "moves.sqlite"
    make_moves(path)
    return path


def test_a_gpu_that_moved_keeps_one_history_and_its_fall_names_its_serial(moves) -> None:
    with Store.open(moves, create=False) as store:
        histories = {h.gpu.key: h for h in load_histories(store)}
    mover = histories[MOVER]
    (series,) = mover.series
    assert len(series.points) == 24
    assert [p.host for p in series.points] == ["node-a"] * 12 + ["node-b"] * 12
    (change,) = series.change_points
    assert change.kind == REGRESSED and change.index == 16
    assert change.change == pytest.approx(-0.18, abs=0.02)
    (finding,) = mover.findings
    assert finding.p_value is not None and finding.p_value < 0.001
    text = finding.describe()
    assert text.startswith(f"GPU {MOVER} (now in node-b, before in node-a): gemm ")
    assert "fell 1" in text and "% from 2026-" in text and "(change point, p=" in text
    assert mover.regressed
    # The GPU that stayed, and the one that took the mover's place, did not fall.
    assert not histories[STAYER].findings and len(histories[STAYER].series[0].points) == 24
    assert len(histories["1654923001009"].series[0].points) == 12
    assert not histories["1654923001009"].findings


def test_a_case_on_several_ranks_belongs_to_every_gpu_it_used() -> None:
    rng = np.random.default_rng(1)

    def m(device: str, **params: object) -> Measurement:
        case = Case.make("collectives", "c1", "collective",
                         {"op": "all-reduce", "bytes": 2**20, **params}, device)
        return rated(case, 1e-3, 2**20, "B/s", rng=rng)

    recorded = range(8)
    assert devices_of(m("cuda:2"), recorded) == (2,)
    assert devices_of(m("cuda:0", world_size=4), recorded) == (0, 1, 2, 3)
    assert devices_of(m("cuda:4", world_size=8), [4, 5, 6, 7]) == (4, 5, 6, 7)
    # Sixteen ranks over two nodes: this node's eight GPUs are those its runs recorded.
    assert devices_of(m("cuda:0", world_size=16), recorded) == tuple(range(8))
    assert devices_of(m("cpu"), recorded) == ()
    assert devices_of(rated(gemm_case(), 1e-3, 1.0, "FLOP/s", rng=rng), [1]) == ()


def test_diagnose_by_gpu_prints_the_fall_and_exits_1(moves, capsys) -> None:
    code = main(["diagnose", "--by-gpu", "--json", "--store", str(moves)])
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    first = data["gpus"][0]
    assert first["key"] == MOVER and first["regressed"] is True
    assert [s["host"] for s in first["stays"]] == ["node-a", "node-b"]
    (finding,) = first["findings"]
    assert finding["serial"] == MOVER and finding["kind"] == REGRESSED
    assert finding["description"].startswith(f"GPU {MOVER} (now in node-b, before in node-a)")

    assert main(["diagnose", "--gpu", f"gpu-{MOVER}", "--store", str(moves)]) == 1
    out = capsys.readouterr().out
    assert f"GPU {MOVER} (now in node-b, before in node-a)" in " ".join(out.split())
    assert main(["diagnose", "--gpu", STAYER, "--json", "--store", str(moves)]) == 0
    assert [g["key"] for g in json.loads(capsys.readouterr().out)["gpus"]] == [STAYER]
    assert main(["diagnose", "--gpu", "no-such-gpu", "--store", str(moves)]) == 2
    assert "no GPU 'no-such-gpu'" in capsys.readouterr().err
    assert main(["diagnose", "--by-gpu", "--drain-list", "x", "--store", str(moves)]) == 2
    assert "takes no --drain-list" in capsys.readouterr().err


GATE = Case.make("gate", "1", "qualify", {"figure": "gemm-bf16", "level": 2}, "cuda:0")
NODE_A = [f"16549230020{i:02d}" for i in range(8)]
NODE_B = [f"16549230030{i:02d}" for i in range(8)]
GATED = NODE_A[5]  # device 5 of node-a for 12 runs, then device 3 of node-b
SPARE = "1654923004000"  # GATED's place in node-a after it moved
LEVEL = {s: 700.0 + 10 * i for i, s in enumerate([*NODE_A, *NODE_B, SPARE])}  # TFLOP/s


def _gate(values: list[float], status: str = "ok") -> Measurement:
    """A gate case as the qualify family stores it: a figure per GPU (`gpuN`), per pair
    and of the node, then the counts of findings."""
    figures = [Figure(f"gpu{i}", v, "TFLOP/s") for i, v in enumerate(values)]
    figures += [Figure("gpu0-gpu1", 300.0, "GB/s"), Figure("node", 400.0, "GB/s"),
                Figure("failed", 0.0, "findings", higher_is_better=False),
                Figure("passed", float(len(values)), "findings")]
    # A failed gate judged its figures: its findings are stored with them.
    judged = {"findings": [{"subject": "gpu3", "level": "fail", "rule": "gemm-bf16 ≥ 552",
                            "message": "below the gate", "code": "ACCEL_GEMM_BELOW_GATE"}]}
    return stored_measurement(GATE, status, figures=tuple(figures),
                              details=judged if status == "failed" else {})


def make_gated(path: Path, seed: int = 7) -> None:
    """24 runs of the bf16 GEMM gate two days apart on node-a and node-b, each GPU at its
    own level (its serial's, whichever device it is); GATED moves from device 5 of node-a
    to device 3 of node-b after 12 runs and is 20% slower from run 16 on. A last gate on
    node-b fails, judging GATED below its gate: its figures are points all the same."""
    rng = np.random.default_rng(seed)
    with Store.open(path) as store:
        for i in range(25):
            at = START + 2 * i * DAY
            node_a = list(NODE_A) if i < 12 else [*NODE_A[:5], SPARE, *NODE_A[6:]]
            node_b = list(NODE_B) if i < 12 else [*NODE_B[:3], GATED, *NODE_B[4:]]
            for host, serials, when in (("node-a", node_a, at), ("node-b", node_b, at + 60)):
                values = [LEVEL[s] * (0.8 if s == GATED and i >= 16 else 1.0)
                          * (1 + 0.004 * rng.standard_normal()) for s in serials]
                _add(store, host, serials, when,
                     [_gate(values, "failed" if i == 24 and host == "node-b" else "ok")])


def test_a_gate_case_gives_each_gpu_its_own_figure_and_a_moved_gpus_fall_names_it(
        tmp_path) -> None:
    path = tmp_path / "gated.sqlite"
    make_gated(path)
    with Store.open(path, create=False) as store:
        histories = {h.gpu.key: h for h in load_histories(store)}
    gated = histories[GATED]
    (series,) = gated.series
    assert series.case.key == GATE.key and series.figure == PER_GPU
    assert series.unit == "TFLOP/s" and series.higher_is_better
    # Its own figure in every run, as gpu5 of node-a, then gpu3 of node-b; the last run's
    # gate failed on it, and its figure is a point all the same.
    assert [p.host for p in series.points] == ["node-a"] * 12 + ["node-b"] * 13
    assert [round(p.value, -1) for p in series.points] == [LEVEL[GATED]] * 16 + [600.0] * 9
    (change,) = series.change_points
    assert change.kind == REGRESSED and change.index == 16
    assert change.change == pytest.approx(-0.2, abs=0.02)
    (finding,) = gated.findings
    assert finding.describe().startswith(
        f"GPU {GATED} (now in node-b, before in node-a): gate figure=gemm-bf16 level=2 "
        "fell ")
    # Every other GPU has its own figure alone (not the headline of the device the case
    # ran on, nor a pair's or the node's), and did not fall.
    for key, h in histories.items():
        (s,) = h.series
        assert s.figure == PER_GPU and s.unit == "TFLOP/s"
        if key != GATED:
            assert not h.findings, key
            assert all(p.value == pytest.approx(LEVEL[key], rel=0.03) for p in s.points), key
            assert float(np.median([p.value for p in s.points])) == pytest.approx(
                LEVEL[key], rel=0.005), key
    assert len(histories[NODE_A[0]].series[0].points) == 25
    assert len(histories[NODE_B[0]].series[0].points) == 25


def test_diagnose_by_gpu_names_the_gpu_whose_gate_figure_fell(tmp_path, capsys) -> None:
    path = tmp_path / "gated.sqlite"
    make_gated(path)
    assert main(["diagnose", "--by-gpu", "--json", "--store", str(path)]) == 1
    data = json.loads(capsys.readouterr().out)
    named = [g for g in data["gpus"] if g["findings"]]
    assert [g["key"] for g in named] == [GATED] and data["gpus"][0]["key"] == GATED
    (finding,) = named[0]["findings"]
    assert finding["case"] == "gate figure=gemm-bf16 level=2"
    assert finding["figure"] == PER_GPU and finding["kind"] == REGRESSED
    assert main(["diagnose", "--gpu", GATED, "--store", str(path)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert f"GPU {GATED} (now in node-b, before in node-a): gate figure=gemm-bf16" in out
