"""scaled_dot_product_attention on the GPU through each backend, with the one used."""

from __future__ import annotations

import pytest
from gpu_runs import run_on_gpu

from accelbench.benchmarks.micro.attention import BACKENDS

pytestmark = pytest.mark.gpu

FUSED = ("flash", "efficient", "cudnn")


@pytest.fixture(scope="module")
def by_backend(tmp_path_factory):
    store = tmp_path_factory.mktemp("attention") / "results.sqlite"
    run = run_on_gpu(store, ["attention"],
                     {"batch": "2", "heads": "8", "seq": "1024", "head_dim": "64",
                      "dtype": "bf16", "causal": "true", "pass": "fwd",
                      "backend": ",".join(BACKENDS)})
    return {m.case.param_dict["backend"]: m for m in run.measurements}


def test_each_forced_backend_runs_as_itself_or_is_skipped_with_pytorchs_reasons(by_backend,
                                                                                 gpu):
    assert sorted(by_backend) == sorted(BACKENDS)
    ran = []
    for backend, m in by_backend.items():
        if backend == "auto":
            continue
        if m.status == "skipped":
            assert m.reason.startswith(f"the {backend} attention backend cannot run this "
                                       f"case on {gpu.device.name}"), m.reason
            continue
        assert m.status == "ok", (backend, m.reason)
        assert m.details["backend_requested"] == backend
        assert m.details["backend_used"] == backend
        assert not m.details["backend_library"].startswith("unknown")
        assert m.details["check_rel_error_full"] <= m.details["check_tolerance"]
        assert m.figure("throughput").value > 0
        ran.append(backend)
    assert "math" in ran  # PyTorch's reference path runs everywhere
    assert set(FUSED) & set(ran), "no fused attention backend runs on this GPU"


def test_auto_records_the_backend_pytorch_chose(by_backend):
    auto = by_backend["auto"]
    assert auto.status == "ok", auto.reason
    used = auto.details["backend_used"]
    # PyTorch's choice is one of the backends that also run when forced.
    assert used in (*FUSED, "math") and by_backend[used].status == "ok", used
    assert auto.details["check_rel_error_full"] <= auto.details["check_tolerance"]
    assert set(auto.details["sdp_enabled"]) >= {"flash", "efficient", "math"}
