"""`accelbench profile` of a collective on two CPU ranks (torchrun, gloo)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from accelbench.cli.main import build_parser
from accelbench.cli.profile_cmd import build_request
from accelbench.core.request import ProfileRequest
from accelbench.store import Store


def test_the_profile_request_holds_every_option_that_says_what_to_profile():
    args = build_parser().parse_args([
        "profile", "collectives", "-p", "op=all-reduce", "-p", "bytes=64K", "--device", "cpu",
        "--nproc-per-node", "2", "--steps", "3", "--memory", "--json", "--store", "s.db"])
    request = build_request(args)
    assert request.benches == ("collectives",) and request.device == "cpu"
    assert request.overrides == {"op": ("all-reduce",), "bytes": ("64K",)}
    assert request.nproc_per_node == 2
    assert request.profile == ProfileRequest(wait=1, warmup=2, active=3, memory=True)
    # Where it is stored and how it is printed are not what is asked.
    assert "s.db" not in request.to_json()


@pytest.mark.slow
def test_a_collective_is_profiled_on_every_rank_and_stored_once(tmp_path):
    store = tmp_path / "results.sqlite"
    result = subprocess.run(
        [sys.executable, "-m", "accelbench", "profile", "collectives", "-p", "op=all-reduce",
         "-p", "bytes=16K", "--device", "cpu", "--nproc-per-node", "2", "--oversubscribe",
         "--wait", "1",
         "--warmup", "1", "--steps", "2", "--store", str(store), "--json"],
        capture_output=True, text=True, timeout=300,
    )
    # A rank's own last words come before torchrun's summary: keep both.
    assert result.returncode == 0, _ends(result.stderr)
    # OMP_NUM_THREADS is set for torchrun, so it has no banner to print; nor has Kineto.
    assert "Setting OMP_NUM_THREADS" not in result.stderr
    assert "gpuGetDeviceCount" not in result.stderr
    out = json.loads(result.stdout)
    assert out["status"] == "complete"
    assert out["threads"]["used"] >= 1 and "ranks" in out["threads"]["source"]
    names = sorted(p.rsplit("/", 1)[-1].split(".")[0] for p in out["traces"])
    assert names == ["rank0", "rank1"]
    analysis = out["analysis"]
    assert analysis["trace_file"].startswith("rank0.")
    assert analysis["window"]["step_numbers"] == [2, 3]
    assert analysis["breakdown"]["parts_s"]["communication"] > 0
    assert analysis["overlap"]["communication_s"] > 0
    assert any(o["name"] == "c10d::allreduce_" for o in analysis["top_operators"])
    with Store.open(store, create=False) as opened:
        (run,) = opened.list_runs()
        (profile,) = opened.profiles_for_run(run.id)
        (m,) = opened.load_run(run.id).measurements
    assert run.suite == "profile" and run.status == "complete"
    assert m.details["dist"]["world_size"] == 2 and m.case.param_dict["world_size"] == 2
    assert len(profile.trace_paths) == 2


def _ends(text: str, keep: int = 4000) -> str:
    return text if len(text) <= 2 * keep else f"{text[:keep]}\n[...]\n{text[-keep:]}"
