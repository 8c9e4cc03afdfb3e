"""A family is one folder: `tally` (tests/families/tally) plugs in by adding its
family's declaration to the registry list, and nothing else: `list` shows it, `run` measures it
in a worker and stores it, and the terminal, Markdown and HTML reports show its section
and its charts in the same place."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from tally.family import FAMILY

import accelbench.benchmarks
from accelbench.cli.main import main
from accelbench.core.registry import Registry
from accelbench.errors import EXIT_OK

HERE = Path(__file__).parent


@pytest.fixture
def with_tally(monkeypatch):
    registry = Registry.of([*accelbench.benchmarks.REGISTRY.declared, FAMILY])  # the one line
    monkeypatch.setattr(accelbench.benchmarks, "REGISTRY", registry)
    # The worker imports the family's measure function by its name, as it does ours.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, (str(HERE), os.environ.get("PYTHONPATH")))))
    return registry


def test_the_family_is_listed(with_tally, capsys) -> None:
    assert main(["list", "--family", "tally", "--json"]) == EXIT_OK
    listed = json.loads(capsys.readouterr().out)["benchmarks"]
    assert [b["name"] for b in listed] == ["tally"]
    assert "tally" in with_tally.families


def test_a_run_of_the_family_reports_its_section_everywhere(with_tally, tmp_path,
                                                            capsys) -> None:
    store = str(tmp_path / "results.sqlite")
    report = tmp_path / "run.md"
    assert main(["run", "--device", "cpu", "--bench", "tally", "-p", "n=1000,100000",
                 "--max-time", "0.05", "--no-telemetry", "--report", str(report),
                 "--store", store]) == EXIT_OK
    terminal = capsys.readouterr().out
    assert "Tally: primes per range" in terminal

    markdown = report.read_text()
    titles = re.findall(r"^## (.+)$", markdown, re.M)
    assert titles[0] == "Results" and "Tally" in titles
    assert "| 100000 | 9592 |" in markdown  # the family's own table, measured for real
    assert "### tally" in markdown  # and its rows in the Results, like any family's

    page = tmp_path / "run.html"
    assert main(["report", "latest", "--store", store, "-o", str(page)]) == EXIT_OK
    html = page.read_text()
    tally = html.index('id="run-1-tally"')
    assert html.index("Tally: share of primes") > tally  # its chart under its heading
    results = html.index('id="run-1-results"')
    assert results < html.index("Tally: numbers sieved per second") < tally
    assert html.count("<svg") >= 2
