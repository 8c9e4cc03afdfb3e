"""Our analysis agrees with HolisticTraceAnalysis on the CUDA fixture, where HTA runs.

HTA is not a dependency of accelbench (see README, Profiling), only of its development
environment (requirements-dev.txt); elsewhere this check is skipped.
HTA measures from the first kernel's start rather than the first step's, so idle time
is compared as busy time; and it drops the last step unless told to keep it.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

from accelbench.profile.analysis import analyze_file

hta = pytest.importorskip("hta.trace_analysis")

CUDA = Path(__file__).parents[1] / "fixtures" / "traces" / "cuda_h100_rank0.pt.trace.json.gz"
US = 1e-6


@pytest.fixture(scope="module")
def hta_analysis(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hta")
    shutil.copy(CUDA, folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return hta.TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=True)


@pytest.mark.filterwarnings("ignore")
def test_temporal_breakdown_and_overlap_agree(hta_analysis):
    ours = analyze_file(CUDA)
    parts = ours["breakdown"]["parts_s"]
    theirs = hta_analysis.get_temporal_breakdown(visualize=False).iloc[0]
    assert parts["compute"] == pytest.approx(theirs["compute_time(us)"] * US)
    assert parts["communication"] + parts["memory"] == pytest.approx(
        theirs["non_compute_time(us)"] * US)
    busy = ours["window"]["duration_s"] - parts["idle"]
    assert busy == pytest.approx((theirs["kernel_time(us)"] - theirs["idle_time(us)"]) * US)
    overlap = hta_analysis.get_comm_comp_overlap(visualize=False).iloc[0]
    assert 100 * ours["overlap"]["ratio"] == pytest.approx(overlap["comp_comm_overlap_pctg"])


@pytest.mark.filterwarnings("ignore")
def test_launch_statistics_agree(hta_analysis):
    ours = analyze_file(CUDA)["launches"]
    stats = hta_analysis.get_cuda_kernel_launch_stats(visualize=False,
                                                      include_memory_events=False)[0]
    assert len(stats) == ours["launches"]
    assert stats["cpu_duration"].mean() * US == pytest.approx(ours["cpu_overhead_s"]["mean"])
    assert stats["launch_delay"].median() * US == pytest.approx(
        ours["launch_delay_s"]["median"])
    assert stats["launch_delay"].max() * US == pytest.approx(ours["launch_delay_s"]["max"])
