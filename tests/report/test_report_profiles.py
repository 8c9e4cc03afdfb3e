"""A run's stored profile appears in its report, in Markdown and in HTML."""

import subprocess
import sys

import pytest

from accelbench.cli.main import main


@pytest.mark.slow
def test_report_shows_the_profile_analysis(tmp_path, capsys):
    store = tmp_path / "results.sqlite"
    assert main(["profile", "gemm", "-p", "shape=64", "--steps", "3", "--warmup", "1",
                 "--store", str(store), "--output", str(tmp_path / "traces"), "--json"]) == 0
    capsys.readouterr()

    assert main(["report", "-o", "-", "--store", str(store)]) == 0
    markdown = capsys.readouterr().out
    assert "## Profiles" in markdown and "### Profile of gemm" in markdown
    assert "CPU time" in markdown

    html_path = tmp_path / "report.html"
    assert main(["report", "-o", str(html_path), "--store", str(store)]) == 0
    html = html_path.read_text(encoding="utf-8")
    assert ">Profile of gemm" in html and "CPU time" in html

    # Reading a profile back for a report needs no torch.
    code = ("import sys\nfrom accelbench.cli.main import main\n"
            f"assert main(['report', '-o', '-', '--store', {str(store)!r}]) == 0\n"
            "assert 'torch' not in sys.modules\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
