"""The analysis commands run where only the results are: none of them imports torch."""

from __future__ import annotations

import subprocess
import sys

import pytest
from analysis_data import corpus_store


@pytest.mark.slow
def test_analysis_commands_do_not_import_torch(tmp_path) -> None:
    store = str(corpus_store(tmp_path))
    base = str(tmp_path / "baseline.json")
    commands = [
        ["compare", "20221101", "20221115", "--json"],
        ["compare", "*MI100*", "*H100*"],
        ["generations", "--chart", str(tmp_path / "g.svg")],
        ["history", "gemm dtype=bf16", "--json"],
        ["baseline", "gen=*MI250X*", "-o", base],
        ["diagnose", "--baseline", base],
        ["report", "20221101", "*H100*", "-o", str(tmp_path / "r.html")],
        ["report", "latest", "--format", "md", "-o", str(tmp_path / "r.md")],
        ["merge", store, "--into", str(tmp_path / "merged.sqlite")],
    ]
    code = (
        "import sys\n"
        "from accelbench.cli.main import main\n"
        f"for argv in {commands!r}:\n"
        f"    rc = main(argv + ['--store', {store!r}] if argv[0] != 'merge' else argv)\n"
        "    assert rc in (0, 1), (argv, rc)\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
