"""The train and infer benchmarks through the worker's case path, in this process."""

from __future__ import annotations

import gc
import statistics
import weakref

import pytest
from model_cases import TINY

from accelbench.benchmarks.models import infer, tasks, train, zoo
from accelbench.core.measurement import CaseSkipped

TRAIN_FIGURES = ["throughput", "tokens", "model_flops", "window_time", "p50", "p90", "p99",
                 "peak_memory"]


def test_training_figures_are_total_over_total_with_tokens_and_flops(execute) -> None:
    m = execute(train.BENCHMARK, model="gpt2-tiny", dtype="fp32", **TINY)
    assert m.status == "ok", m.reason
    assert [f.name for f in m.figures] == TRAIN_FIGURES
    samples_per_call = TINY["batch"] * TINY["steps_per_window"]
    assert m.details["samples_per_call"] == samples_per_call
    # Total samples over total timed time, not over the median window.
    total_time = sum(m.samples) * m.number
    total_samples = samples_per_call * len(m.samples) * m.number
    assert m.figure("throughput").value == pytest.approx(total_samples / total_time)
    assert m.figure("throughput").value == pytest.approx(
        samples_per_call / statistics.fmean(m.samples))
    assert m.figure("tokens").value == pytest.approx(m.figure("throughput").value * TINY["seq"])
    assert m.figure("model_flops").unit == "FLOP/s"
    assert m.figure("mfu") is None  # the CPU has no published peak
    assert m.figure("peak_memory").unit == "B" and m.figure("peak_memory").value > 0
    p50 = m.figure("p50").value
    assert p50 == pytest.approx(statistics.median(m.samples) / TINY["steps_per_window"])
    d = m.details
    assert d["loss_last"] < d["loss_first"]
    assert d["precision"] == "fp32 (TF32 off)" and d["optimizer"] == "AdamW (fused)"
    assert d["parameters"] == zoo.parameter_count(zoo.MODELS["gpt2-tiny"])
    assert "6*N" not in d["model_flop_formula"] or "training 3x" in d["model_flop_formula"]


def test_mfu_against_the_published_peak(execute, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("accelbench.core.context.CaseContext.peak_flops",
                        lambda self, dtype: 1e12 if dtype == "bf16" else None)
    m = execute(train.BENCHMARK, model="vit-tiny", dtype="bf16", **TINY)
    assert m.status == "ok", m.reason
    flops = m.details["model_flop_per_call"] / statistics.fmean(m.samples)
    assert m.figure("mfu").unit == "%"
    assert m.figure("mfu").value == pytest.approx(100 * flops / 1e12)
    assert m.figure("model_flops").peak == 1e12
    assert "flop_counter" in m.details["model_flop_formula"]
    assert m.figure("tokens") is None


@pytest.mark.slow
def test_whole_model_cast_is_labelled_and_keeps_batch_norm_in_fp32(execute) -> None:
    import torch

    from accelbench.benchmarks.models.precision import Precision

    m = execute(train.BENCHMARK, model="resnet-tiny", dtype="bf16", cast="true", **TINY)
    assert m.status == "ok", m.reason
    assert "whole-model cast (SuperBench-style" in m.details["precision"]
    model = Precision("bf16", cast=True).prepare(torch, zoo.build(zoo.MODELS["resnet-tiny"]))
    assert model.get_parameter("conv1.weight").dtype == torch.bfloat16
    assert model.get_parameter("bn1.weight").dtype == torch.float32


def test_fp16_autocast_trains_with_a_gradient_scaler(execute) -> None:
    m = execute(train.BENCHMARK, model="llama-tiny", dtype="fp16", **TINY)
    assert m.status == "ok", m.reason
    assert m.details["loss_scaling"] is True
    assert m.details["precision"] == "fp16 autocast with gradient scaling"


@pytest.mark.slow
def test_find_batch_on_the_cpu_uses_a_memory_model(execute) -> None:
    m = execute(train.BENCHMARK, model="lstm-tiny", dtype="fp32", find_batch="true", **TINY)
    assert m.status == "ok", m.reason
    found = m.details["find_batch"]
    assert TINY["batch"] <= found["batch"] <= 4096 and m.details["batch"] == found["batch"]
    assert "available memory" in found["rule"]


@pytest.mark.parametrize(
    ("given", "status", "reason"),
    [
        ({"dtype": "tf32"}, "skipped", "unsupported precision: tf32 is a GPU matrix-core mode"),
        ({"dtype": "fp32", "cast": "true"}, "skipped", "cast applies to fp16 and bf16 only"),
        ({"channels_last": "true"}, "skipped", "channels_last applies to CNNs only"),
        ({"h2d": "true"}, "skipped", "the CPU has no host-to-device copy"),
        ({"seq": "4096"}, "failed", "longer than bert-tiny's 128 positions"),
        ({"config": "layers=0"}, None, None),  # refused as input, before anything runs
        ({"config": "hidden=33"}, "failed", "bert-tiny failed to build"),
    ],
)
def test_cases_that_cannot_run_are_recorded_with_their_reason(execute, given, status, reason):
    from accelbench.errors import UserError

    params = {"model": "bert-tiny", **TINY, **given}
    if status is None:
        with pytest.raises(UserError):
            execute(train.BENCHMARK, **params)
        return
    m = execute(train.BENCHMARK, **params)
    assert m.status == status
    assert reason in m.reason


@pytest.mark.slow
def test_out_of_memory_is_recorded_and_the_model_is_released(
    execute, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    built: list[weakref.ref[torch.nn.Module]] = []
    real_build, real_loss = zoo.build, tasks.loss

    def tracked_build(spec, image=224, head=zoo.HEAD_TASK):
        model = real_build(spec, image, head)
        built.append(weakref.ref(model))
        return model

    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(zoo, "build", tracked_build)
    monkeypatch.setattr(tasks, "loss", out_of_memory)
    m = execute(train.BENCHMARK, model="gpt2-tiny", **TINY)
    assert m.status == "failed" and m.reason.startswith("out of memory")
    gc.collect()
    assert built and all(ref() is None for ref in built)  # nothing holds the model

    monkeypatch.setattr(tasks, "loss", real_loss)
    after = execute(train.BENCHMARK, model="gpt2-tiny", **TINY)
    assert after.status == "ok", after.reason


def test_a_missing_library_skips_the_case_with_how_to_install_it(
    execute, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_torchvision(spec, image=224, head=zoo.HEAD_TASK):
        raise ModuleNotFoundError("No module named 'torchvision'", name="torchvision")

    monkeypatch.setattr(zoo, "build", no_torchvision)
    m = execute(infer.BENCHMARK, model="resnet-tiny", **TINY)
    assert m.status == "skipped"
    assert "needs torchvision, which is not installed" in m.reason
    assert "same package index as your torch" in m.reason


@pytest.mark.slow
def test_the_batch_search_survives_out_of_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from accelbench.benchmarks.models import batchsize
    from accelbench.benchmarks.models.precision import Precision
    from accelbench.benchmarks.models.trainer import ModelSetup, Trainer

    real_loss = tasks.loss

    def limited(torch_, spec, model, inputs, head=zoo.HEAD_TASK):
        if len(inputs["x"]) > 20:
            raise torch.OutOfMemoryError("out of memory")
        return real_loss(torch_, spec, model, inputs, head)

    monkeypatch.setattr(tasks, "loss", limited)
    setup = ModelSetup(zoo.MODELS["vgg-tiny"], Precision("fp16"), batch=2, image=32)
    trainer = Trainer(torch, setup, "cpu")
    found = batchsize.find_on_device(trainer, 2)
    assert 19 <= found.batch <= 20
    assert [t for t in found.tried if not t[1]]  # some tries ran out of memory
    assert trainer.scaler is not None  # a fresh scaler after each failure
    trainer.set_batch(found.batch)
    assert trainer.losses(1)[0] > 0


def test_data_parallel_training_needs_ranks(ctx) -> None:
    with pytest.raises(CaseSkipped, match="at least 2 ranks"):
        train.DDP_BENCHMARK.measure(ctx, train.DDP_BENCHMARK.resolve({"model": "bert-tiny"}))


def test_compiled_training_reports_compile_time_apart(execute) -> None:
    pytest.importorskip("torch._inductor")
    m = execute(train.BENCHMARK, model="lstm-tiny", compile="true", **TINY)
    assert m.status == "ok", m.reason
    assert m.figure("compile_time").unit == "s" and m.figure("compile_time").value > 0


def test_inference_latency_is_timed_call_by_call(execute) -> None:
    m = execute(infer.BENCHMARK, model="bert-tiny", batch=1, seq=16)
    assert m.status == "ok", m.reason
    assert "single synchronised forward passes" in m.details["latency"]
    assert m.details["samples_per_call"] == 4  # default window: four forward passes
