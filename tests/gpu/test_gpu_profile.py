"""`accelbench profile` on the GPU: device activity in the trace, every kernel linked to
the runtime call that launched it."""

from __future__ import annotations

import json

import pytest
from gpu_runs import accelbench

from accelbench.profile.categories import COMPUTE, device_category, is_kernel_launch
from accelbench.profile.launches import link
from accelbench.profile.trace import load
from accelbench.store import Store

pytestmark = pytest.mark.gpu

STEPS = 3


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    store = tmp_path_factory.mktemp("profile") / "results.sqlite"
    result = accelbench("profile", "gemm", "-p", "shape=2048", "--dtype", "bf16",
                        "--device", "cuda", "--wait", "1", "--warmup", "1",
                        "--steps", str(STEPS), "--store", str(store), "--json")
    assert result.returncode == 0, result.stderr
    return store, json.loads(result.stdout)


def test_the_profile_is_of_device_time_and_stored(profiled, gpu):
    store, out = profiled
    assert out["status"] == "complete" and out["problems"] == []
    analysis = out["analysis"]
    assert analysis["basis"] == "device"
    assert analysis["platform"] == gpu.platform
    assert analysis["window"]["steps"] == STEPS
    breakdown = analysis["breakdown"]
    assert sum(breakdown["parts_s"].values()) == pytest.approx(breakdown["total_s"], rel=1e-9)
    assert breakdown["parts_s"]["compute"] > 0
    assert analysis["top_kernels"]
    with Store.open(store, create=False) as opened:
        stored = opened.load_run(out["run_id"])
        (profile,) = opened.profiles_for_run(out["run_id"])
    assert stored.fingerprint["platform"] == gpu.platform
    (m,) = stored.measurements
    assert m.status == "ok" and len(m.samples) == STEPS
    assert any(w.startswith("profiled:") for w in m.warnings)
    assert profile.analysis == analysis


def test_every_kernel_of_the_profiled_steps_is_linked_to_its_launch(profiled):
    _, out = profiled
    launches = out["analysis"]["launches"]
    assert launches is not None, "the trace recorded no kernel launch"
    assert launches["linked"] >= STEPS and launches["launch_delay_s"] is not None
    (path,) = out["traces"]
    trace = load(path)
    start, end = trace.steps[0].ts, max(step.end for step in trace.steps)
    kernels = [e for e in trace.device if start <= e.ts < end and e.cat == "kernel"
               and device_category(e.cat, e.name) == COMPUTE]
    assert len(kernels) >= STEPS  # at least the GEMM of each step
    linked = {kernel for _, kernel in link(trace, [r for r in trace.runtime
                                                   if is_kernel_launch(r.name)])}
    unlinked = sorted({k.name for k in kernels if k not in linked})
    assert not unlinked, f"kernels with no launch found: {unlinked}"
