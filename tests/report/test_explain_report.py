"""Stored explanations in a run's report and on the published site's Regressions page:
shown where they are, absent where there are none, hostile text escaped."""

from __future__ import annotations

from typing import Any

from accelbench.report.run_view import run_sections
from accelbench.report.site.pages import regressions_page
from accelbench.report.site.render import render_page
from accelbench.store import StoredExplanation


def _findings(label: str = "gemm shape=256") -> dict[str, Any]:
    return {
        "format_version": 1,
        "case": {"key": "k" * 16, "label": label, "benchmark": "gemm"},
        "runs": {"a": "run-a", "b": "run-b"},
        "stored": {"figure": "throughput", "unit": "FLOP/s", "a": 2e9, "b": 1e9,
                   "ratio": 0.5, "b_worse": True},
        "profiles": {"a": ["p1"], "b": ["p2"]},
        "step": {"a_s": 1e-3, "b_s": 3e-3, "delta_s": 2e-3, "consistent": True},
        "operators": [{"name": "aten::mm", "a_s_per_step": 1e-3, "b_s_per_step": 3e-3,
                       "delta_s_per_step": 2e-3, "ratio": 3.0, "consistent": True}],
        "largest": {"name": "aten::mm", "delta_s_per_step": 2e-3, "ratio": 3.0},
        "stack": [{"key": "torch.version", "label": "PyTorch", "a": "2.13.0", "b": "2.14.1"}],
        "tuning": [],
        "repro": {"a": {"run": "python -m accelbench run --request a.run.json"}},
        "summary": "the largest mover is aten::mm",
    }


def _explanation(**kwargs: Any) -> StoredExplanation:
    found = _findings(**kwargs)
    return StoredExplanation(7, "run-a", "run-b", "k" * 16, found["case"]["label"], found,
                             1_800_000_000.0)


def test_a_runs_report_has_a_section_per_explanation_after_its_results() -> None:
    sections = run_sections([], [_explanation()])
    assert sections[-1].key == "explanations"
    titles = [t.title for t in sections[-1].tables]
    assert titles[0].startswith("Why gemm shape=256 moved")
    assert "Reproduce" in titles
    assert "explanations" not in [s.key for s in run_sections([], [])]


def test_the_regressions_page_lists_explanations_only_when_there_are_some() -> None:
    plain = regressions_page({}, 0.05)
    assert [b.title for b in plain.blocks] == ["Steps"]
    page = regressions_page({}, 0.05, [_explanation()])
    block = page.blocks[-1]
    assert block.title == "Explained"
    (row,) = block.tables[0].rows
    cells = [getattr(c, "text", c) for c in row.cells]
    assert "aten::mm" in cells and "PyTorch" in cells and row.style == "bad"


def test_hostile_text_in_a_stored_explanation_is_escaped() -> None:
    html = render_page(regressions_page({}, 0.05,
                                        [_explanation(label="<script>alert(1)</script>")]))
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;" in html
