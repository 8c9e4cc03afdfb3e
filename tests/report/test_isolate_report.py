"""isolate in the reports: the named table and the matrices (Markdown, golden), heat
maps in HTML with the named node marked."""

from __future__ import annotations

import itertools
import re
from dataclasses import replace

from accelbench.benchmarks.isolate.schedule import NODE, Pair
from accelbench.benchmarks.isolate.settle import BUDGET, SETTLED, Settled, settle
from accelbench.benchmarks.isolate.verdict import PairFigures, judge
from accelbench.benchmarks.isolate.view import isolate_tables
from accelbench.core.case import Case
from accelbench.core.measurement import Figure
from accelbench.report.html import html_report
from accelbench.report.markdown import run_report
from accelbench.store import RunRecord, StoredRun
from fakes import stored_measurement

GOLDEN_MARKDOWN = """\
## Isolate

Every pair of nodes (one rank each) and every pair of ranks within a node, measured in \
rounds of disjoint pairs at once (they share the fabric; --serial measures one at a time): \
the ping-pong latency (half the round trip), the send/recv bandwidth both ways at once, \
the all-reduce bus bandwidth. The rule, each metric alone: a node (or rank) is named when \
the median over its pairs lies more than 5 robust standard deviations (1.4826 MAD) from \
the median node's, on the slow side, and is at least 1.25x slower; among the pairs of the \
others, a link is named by the same test against their median pair. It repeats passes \
over every pair until the last few name the same (a settled, conclusive naming) or its \
time or passes run out (inconclusive, exit 9); the figures shown pool every pass.

### Isolate: slow nodes and links

| Named | Fabric | Metric | Figure | Median | Slower | Robust SD | Passes |
|---|---|---|---:|---:|---:|---:|---|
| node n2 | nodes | all-reduce bus bandwidth | 10.0 MB/s | 5.00 GB/s | 500x | 998 | 3 of 3 |

- node n2 is slow: all-reduce bus bandwidth 10.0 MB/s (median of its 2 pairs, 2 of them \
slow) against 5.00 GB/s for the median node, 500x slower, 998 robust SD away; named in 3 \
of 3 passes
- conclusive: the last 3 of 3 passes named the same, as the pooled figures do
- The rule, each metric alone: a node (or rank) is named when the median over its pairs \
lies more than 5 robust standard deviations (1.4826 MAD) from the median node's, on the \
slow side, and is at least 1.25x slower; among the pairs of the others, a link is named by \
the same test against their median pair.

### Isolate: all-reduce bus bandwidth, nodes

|  | n0 | n1 | n2 |
|---|---:|---:|---:|
| n0 | - | 10.0 GB/s | 10.0 MB/s |
| n1 | 10.0 GB/s | - | 10.0 MB/s |
| n2 | 10.0 MB/s | 10.0 MB/s | - |

### Isolate: send/recv bandwidth, nodes

|  | n0 | n1 | n2 |
|---|---:|---:|---:|
| n0 | - | 20.0 GB/s | 20.0 GB/s |
| n1 | 20.0 GB/s | - | 20.0 GB/s |
| n2 | 20.0 GB/s | 20.0 GB/s | - |

### Isolate: send/recv latency, nodes

|  | n0 | n1 | n2 |
|---|---:|---:|---:|
| n0 | - | 5.00 µs | 5.00 µs |
| n1 | 5.00 µs | - | 5.00 µs |
| n2 | 5.00 µs | 5.00 µs | - |
"""


def _run(settled: Settled | None = None) -> StoredRun:
    results = [PairFigures(Pair(NODE, f"n{i}", f"n{j}", (i, j)),
                           {"busbw": 1e7 if 2 in (i, j) else 1e10, "p2p_bw": 2e10,
                            "latency": 5e-6})
               for i, j in itertools.combinations(range(3), 2)]
    verdict = judge(results)
    verdict = replace(verdict, settled=settled or settle([["n2"]] * 3, ["n2"], SETTLED, 3))
    case = Case.make("isolate", "v1", "collective", {"bytes": 1 << 20, "world_size": 3,
                                                      "backend": "gloo"}, "cpu",
                     ["bytes", "world_size", "backend"])
    m = stored_measurement(case, "ok", figures=(Figure("slowest busbw", 1e7, "B/s"),),
                           details={"nodes": ["n0", "n1", "n2"], "bytes": 1 << 20,
                                    "verdict": verdict.to_dict(), "named": verdict.names()})
    record = RunRecord(id="20260101-000000-i1", started_at=1.7e9, finished_at=1.7e9 + 9,
                       status="complete", suite="quick", argv=("isolate",), device="cpu",
                       generation_key="CPU | PyTorch 2.14.1", host="n0",
                       accelbench_version="0.1.0", fingerprint_id="fp", n_ok=1, n_failed=0,
                       n_skipped=0)
    return StoredRun(record, {"format_version": 1, "platform": "cpu"}, (m,))


def test_the_markdown_report_has_the_named_node_and_every_matrix() -> None:
    run = _run()
    text = run_report(run.record, run.fingerprint, run.measurements)
    section = text[text.index("## Isolate"):text.index("## Stack")].rstrip() + "\n"
    assert section == GOLDEN_MARKDOWN


def test_the_named_node_row_is_marked_in_the_matrix() -> None:
    tables = isolate_tables(_run().measurements)
    busbw = tables[1]
    assert busbw.styles == [None, None, "bad"]


def test_a_naming_the_passes_did_not_settle_on_is_shown_as_not_sure() -> None:
    undecided = settle([["n2"], [], ["n2"]], ["n2"], BUDGET, 3)
    (named, *_) = isolate_tables(_run(undecided).measurements)
    assert named.rows[0][0] == "node n2 (not sure)" and named.rows[0][-1] == "2 of 3"
    assert named.styles == ["warn"]
    assert named.notes[0].startswith("not sure: node n2 is slow: ")
    assert named.notes[1] == ("inconclusive: the time budget ended before 3 passes in a row "
                              "named the same (pass 1: n2; pass 2: nothing; pass 3: n2)")


def test_the_html_report_draws_a_heat_map_per_metric_with_the_named_node_in_red() -> None:
    page = html_report([_run()])
    assert "<h3 id=\"run-1-isolate\">Isolate</h3>" in page
    section = page[page.index('id="run-1-isolate"'):]
    maps = re.findall(r'<svg class="chart-svg" role="img" data-chart="(chart-\d+)"', section)
    assert len(maps) == 2  # bus bandwidth and latency of the one fabric
    assert "Isolate: all-reduce bus bandwidth, nodes" in section
    assert "Named slow: n2 (in red)" in section
    first = section[:section.index("</svg>")]
    assert "#b00020" in first  # the named node's tick labels
    assert "10.0 MB/s" in first  # cells are written in a small matrix
    # Not drawn again as a collective sweep: its bytes are a message size, not a sweep.
    assert "Collective bus bandwidth against message size" not in page
