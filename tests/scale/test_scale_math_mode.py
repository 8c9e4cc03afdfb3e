"""The float32 math mode of the training-at-scale cases: TF32 switched off for fp32 and read
back on every rank, also where TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 (set in NVIDIA's
PyTorch containers) made TF32 the process's starting matmul precision, recorded in the
case's details, and a case that cannot switch it off skipped rather than set against the
fp32 peak. Cases run for real on the CPU: on one Gloo rank in this process, and on two
ranks of a torchrun job started with the variable."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from accelbench.benchmarks import REGISTRY
from accelbench.benchmarks.mathmode import TORCH_ALLOW_TF32_CUBLAS_OVERRIDE, MathMode
from accelbench.benchmarks.scale import declaration
from accelbench.core.context import CaseContext, DistInfo
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseResult, CaseSkipped
from accelbench.core.peaks import DevicePeaks
from accelbench.core.registry import Benchmark
from accelbench.core.request import RunRequest
from accelbench.core.timing import PerfCounterClock, TimingPolicy
from accelbench.runner.plan import validate
from accelbench.runner.session import run_session
from accelbench.store import Store

pytestmark = pytest.mark.torch_api

CPU = DeviceInfo(type="cpu", index=None, platform="cpu", name="cpu")
BRIEF = TimingPolicy(max_time=0.05, warmup_time=0.0, min_samples=3, min_warmup_calls=1)
TINY = {"model": "llama-tiny", "seq": 16, "batch": 2, "steps_per_window": 1,
        "parity_steps": 1, "profile_steps": 0}
PIPELINE = {"microbatches": 2}
# Peaks in TFLOP/s with TF32's ten times fp32's: MFU says which one a case was set against.
PEAKS = DevicePeaks("a device with TF32", dense={"fp32": 1e-3, "tf32": 1e-2, "bf16": 2e-2},
                    sparse={}, memory_tbs=None)
OFF = {"tf32_in_effect": False, "matmul_fp32_precision": "ieee",
       "conv_fp32_precision": "ieee", "rnn_fp32_precision": "ieee"}


@pytest.fixture
def one_rank() -> Iterator[DistInfo]:
    """This process as the one rank of a Gloo job."""
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0,  # type: ignore[attr-defined]
                            world_size=1)
    try:
        yield DistInfo(rank=0, world_size=1, local_rank=0, local_world_size=1, backend="gloo")
    finally:
        dist.destroy_process_group()


@pytest.fixture
def tf32_override(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The state a process started with TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 is in: the
    variable set, and TF32 the matmul precision (what PyTorch's Context starts from then);
    put back after the test."""
    import torch

    matmul = torch.backends.cuda.matmul
    saved = matmul.allow_tf32, matmul.fp32_precision
    monkeypatch.setenv(TORCH_ALLOW_TF32_CUBLAS_OVERRIDE, "1")
    matmul.allow_tf32 = True  # the legacy setter: the per-op precision with it
    assert matmul.fp32_precision == "tf32"
    yield
    matmul.allow_tf32, matmul.fp32_precision = saved


def _measure(bench: Benchmark, dist: DistInfo, **given: Any) -> CaseResult:
    own = PIPELINE if bench is declaration.PP else {}
    params = bench.resolve({k: str(v) for k, v in {**TINY, **own, **given}.items()})
    return bench.measure(CaseContext(CPU, PerfCounterClock(), BRIEF, dist=dist), params)


@pytest.mark.parametrize("bench", [declaration.FSDP, declaration.PP], ids=lambda b: b.name)
def test_an_fp32_case_switches_off_the_tf32_the_override_turned_on_and_records_it(
    bench: Benchmark, one_rank: DistInfo, tf32_override: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    monkeypatch.setattr("accelbench.core.peaks.lookup", lambda device: PEAKS)
    result = _measure(bench, one_rank, dtype="fp32")
    assert {k: result.details[k] for k in OFF} == OFF
    assert result.details["tf32_env"] == {TORCH_ALLOW_TF32_CUBLAS_OVERRIDE: "1"}
    assert result.details["fp32_precision_api"] == "fp32_precision"
    [flops] = [r for r in result.rates if r.name == "model_flops"]
    assert flops.peak == PEAKS.dense_flops("fp32")  # the math that ran, on one rank
    # The process's own setting is back after the case.
    assert torch.backends.cuda.matmul.fp32_precision == "tf32"


def test_a_bf16_case_records_its_float32_math_mode_too(one_rank: DistInfo) -> None:
    result = _measure(declaration.FSDP, one_rank, dtype="bf16")
    assert {k: result.details[k] for k in OFF} == OFF
    assert result.details["parity"]["tolerance"] == 2e-2  # the case's own keys before


def test_an_fp32_case_whose_tf32_cannot_be_switched_off_is_skipped(
    one_rank: DistInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    @contextmanager
    def stuck(torch: Any, tf32: bool, ops: Any, platform: str) -> Iterator[MathMode]:
        yield MathMode(tf32=tf32, precisions=dict.fromkeys(ops, "tf32"),
                       api="fp32_precision", platform="cuda")

    monkeypatch.setattr("accelbench.benchmarks.scale.measure.math_mode", stuck)
    with pytest.raises(CaseSkipped, match=r"TF32 could not be switched off: "
                                          r"torch\.backends\.cuda\.matmul\.fp32_precision "
                                          r"reads back 'tf32'"):
        _measure(declaration.FSDP, one_rank, dtype="fp32")


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("bench", ["train-fsdp", "train-pp"])
def test_torchrun_ranks_started_with_the_override_train_fp32_with_tf32_off(
    bench: str, store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TORCH_ALLOW_TF32_CUBLAS_OVERRIDE, "1")  # inherited by the ranks
    # Real ranks on Gloo, here and with the oldest PyTorch accelbench supports (whose
    # pipeline stages, unmatched, abort Gloo in their first exchange: stages.py).
    extra = PIPELINE if bench == "train-pp" else {}
    request = RunRequest(benches=(bench,),
                         overrides={k: (str(v),) for k, v in {**TINY, **extra}.items()},
                         device="cpu", timing={"max_time": 0.2, "warmup_time": 0.0,
                                               "processes": 1},
                         nproc_per_node=2)
    with Store.open(store_path) as store:
        outcome = run_session(validate(request, REGISTRY), store)
        [m] = store.load_run(outcome.run_id).measurements
    assert m.status == "ok", m.reason
    assert {k: m.details[k] for k in OFF} == OFF
    assert m.details["tf32_env"] == {TORCH_ALLOW_TF32_CUBLAS_OVERRIDE: "1"}
