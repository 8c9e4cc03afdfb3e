"""compare, history and generations say when a figure was measured while the device
throttled (from the telemetry stored beside it), and leave such figures out when asked."""

from __future__ import annotations

import json

import numpy as np
import pytest
from analysis_data import add_run, with_telemetry

from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.store import Store

STACK = "NVIDIA H100 80GB HBM3 | CUDA 12.4 | PyTorch 2.6.0"
FLOP = 2 * 4096**3
GEMM = Case.make("gemm", "g1", "micro", {"shape": "4096", "dtype": "bf16"}, "cuda:0")


@pytest.fixture
def store(tmp_path):
    """Three runs of one GEMM: two at full speed, the third throttled (power cap) and
    slower."""
    path = tmp_path / "s.sqlite"
    rng = np.random.default_rng(0)
    with Store.open(path) as s:
        for i, (seconds, throttle) in enumerate([(1e-3, False), (1e-3, False), (1.3e-3, True)]):
            m = with_telemetry(GEMM, seconds, FLOP, "FLOP/s", rng=rng, power_w=650.0,
                               throttle=throttle)
            add_run(s, host="n1", stack=STACK, started_at=1_700_000_000 + 3600 * i,
                    measurements=[m])
        runs = [r.id for r in reversed(s.list_runs())]
    return path, runs


def test_the_stored_record_keeps_the_throttle_reason(store) -> None:
    path, runs = store
    with Store.open(path, create=False) as s:
        (m,) = s.load_run(runs[2]).measurements
        (quiet,) = s.load_run(runs[0]).measurements
    assert m.throttled and m.throttle_reasons == ("power cap",)
    assert not quiet.throttled


def test_compare_marks_and_excludes_throttled_figures(store, capsys) -> None:
    path, runs = store
    assert main(["compare", runs[0], runs[2], "--store", str(path)]) == 0
    out = capsys.readouterr().out
    # A figure measured while the device throttled is never called faster or slower.
    assert "inconclusive: throttled in B" in out and "--exclude-throttled" in out
    main(["compare", runs[0], runs[2], "--store", str(path), "--json"])
    (case,) = json.loads(capsys.readouterr().out)["cases"]
    assert case["b"]["throttled"] and not case["a"]["throttled"]
    assert case["verdict"] == "inconclusive" and case["reason"] == "throttled in B"
    main(["compare", runs[0], runs[2], "--store", str(path), "--json", "--judge-contended"])
    (case,) = json.loads(capsys.readouterr().out)["cases"]
    assert case["judged_anyway"] == ["throttled in B"]
    assert case["reason"].startswith("too few processes")
    assert not case["b"]["contended"]

    assert main(["compare", runs[0], runs[2], "--store", str(path), "--exclude-throttled",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cases"] == []
    (missing,) = data["not_measured"]
    assert "measured while the device throttled: power cap" in missing["reason"]

    # Two quiet runs compare as before, unmarked.
    main(["compare", runs[0], runs[1], "--store", str(path), "--exclude-throttled", "--json"])
    (case,) = json.loads(capsys.readouterr().out)["cases"]
    assert not case["a"]["throttled"] and not case["b"]["throttled"]


def test_history_marks_and_excludes_throttled_points(store, capsys) -> None:
    path, runs = store
    main(["history", "gemm", "--store", str(path), "--json"])
    (series,) = json.loads(capsys.readouterr().out)["series"]
    assert [p["throttled"] for p in series["points"]] == [False, False, True]
    assert [p["contended"] for p in series["points"]] == [False, False, False]
    main(["history", "gemm", "--store", str(path), "--json", "--exclude-throttled"])
    (series,) = json.loads(capsys.readouterr().out)["series"]
    assert [p["run"] for p in series["points"]] == runs[:2]
    main(["history", "gemm", "--store", str(path)])
    assert "(throttled)" in capsys.readouterr().out


def test_generations_marks_and_excludes_throttled_cells(store, capsys) -> None:
    path, runs = store
    main(["generations", "--store", str(path), "--family", "micro", "--json"])
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    (cell,) = row["cells"]
    assert cell["throttled"] and cell["runs"] == runs  # its runs pooled, one throttled
    main(["generations", "--store", str(path), "--family", "micro"])
    assert "(throttled)" in capsys.readouterr().out

    main(["generations", "--store", str(path), "--family", "micro", "--json",
          "--exclude-throttled"])
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    (cell,) = row["cells"]
    assert not cell["throttled"] and cell["runs"] == runs[:2]


def test_every_analysis_command_offers_the_option(capsys) -> None:
    for command in ("compare", "history", "generations"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "--exclude-throttled" in capsys.readouterr().out
