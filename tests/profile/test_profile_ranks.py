"""`accelbench profile` of a collective on two CPU ranks (torchrun, gloo)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from accelbench.cli.main import build_parser
from accelbench.cli.profile_cmd import rank_argv
from accelbench.store import Store


def test_each_rank_is_started_with_the_same_command_less_the_rank_count():
    args = build_parser().parse_args([
        "profile", "collectives", "-p", "op=all-reduce", "-p", "bytes=64K", "--device", "cpu",
        "--nproc-per-node", "2", "--steps", "3", "--memory", "--json", "--store", "s.db"])
    assert rank_argv(args) == [
        "profile", "collectives", "-p", "op=all-reduce", "-p", "bytes=64K", "--device", "cpu",
        "--steps", "3", "--warmup", "2", "--wait", "1", "--store", "s.db", "--memory", "--json"]


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
    out = json.loads(result.stdout)
    assert out["status"] == "complete"
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
