"""compare, history and generations say when a figure was measured on a busy host, and
leave such figures out when asked."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from analysis_data import add_run, rated

from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.store import Store

STACK = "AMD Instinct MI300X | ROCm 6.3 | PyTorch 2.6.0"
BUSY = {"format_version": 1, "contended": True,
        "reasons": ["steal time 12% of CPU time", "1 other process busy: stress (pid 9)"]}
QUIET = {"format_version": 1, "contended": False, "reasons": []}


def gemm(rng, seconds: float, host: dict[str, Any]):
    import dataclasses

    case = Case.make("gemm", "g1", "micro", {"shape": "4096", "dtype": "bf16"}, "cuda:0")
    return dataclasses.replace(rated(case, seconds, 2 * 4096**3, "FLOP/s", rng=rng),
                               hosts=(host,))


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "s.sqlite"
    rng = np.random.default_rng(0)
    with Store.open(path) as s:
        for i, (seconds, host) in enumerate([(1e-3, QUIET), (1e-3, QUIET), (3e-3, BUSY)]):
            add_run(s, host="n1", stack=STACK, started_at=1_700_000_000 + 3600 * i,
                    measurements=[gemm(rng, seconds, host)])
        runs = [r.id for r in reversed(s.list_runs())]
    return path, runs


def test_compare_marks_and_excludes_contended_figures(store, capsys) -> None:
    path, runs = store
    assert main(["compare", runs[0], runs[2], "--store", str(path)]) == 0
    out = capsys.readouterr().out
    # A figure measured on a busy host is never called faster or slower.
    assert "inconclusive: contended in B" in out
    main(["compare", runs[0], runs[2], "--store", str(path), "--json"])
    (case,) = json.loads(capsys.readouterr().out)["cases"]
    assert case["b"]["contended"] and not case["a"]["contended"]
    assert case["verdict"] == "inconclusive" and case["reason"] == "contended in B"
    main(["compare", runs[0], runs[2], "--store", str(path), "--json", "--judge-contended"])
    (case,) = json.loads(capsys.readouterr().out)["cases"]
    assert case["judged_anyway"] == ["contended in B"]
    assert case["reason"].startswith("too few processes")

    assert main(["compare", runs[0], runs[2], "--store", str(path), "--exclude-contended",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cases"] == []
    (missing,) = data["not_measured"]
    assert "busy host: steal time 12% of CPU time" in json.dumps(missing)


def test_history_marks_and_excludes_contended_points(store, capsys) -> None:
    path, runs = store
    main(["history", "gemm", "--store", str(path), "--json"])
    (series,) = json.loads(capsys.readouterr().out)["series"]
    assert [p["contended"] for p in series["points"]] == [False, False, True]
    main(["history", "gemm", "--store", str(path), "--json", "--exclude-contended"])
    (series,) = json.loads(capsys.readouterr().out)["series"]
    assert [p["run"] for p in series["points"]] == runs[:2]
    main(["history", "gemm", "--store", str(path)])
    assert "(contended)" in capsys.readouterr().out


def test_generations_marks_contended_cells(store, capsys) -> None:
    path, _ = store
    main(["generations", "--store", str(path), "--family", "micro", "--json"])
    data = json.loads(capsys.readouterr().out)
    (row,) = data["rows"]
    assert [c["contended"] for c in row["cells"]] == [True]  # its runs pooled, one busy
