"""SuperBench's workloads in `train`: its heads, optimizers, fp16 cast and per-step figure."""

from __future__ import annotations

from typing import Any

import pytest
from model_cases import TINY

from accelbench.benchmarks import REGISTRY
from accelbench.benchmarks.models import flops, heads, tasks, train, zoo
from accelbench.benchmarks.models.precision import Precision
from accelbench.benchmarks.models.results import mean_step_throughput
from accelbench.core.device import DeviceInfo
from accelbench.core.request import RunRequest
from accelbench.runner.plan import expand, validate

BATCH, SEQ = 3, 8


def _superbench_batch(torch, name: str, h2d: bool = False) -> tasks.Batch:
    return tasks.make_batch(torch, zoo.MODELS[name], BATCH, SEQ, 32, torch.device("cpu"),
                            torch.float32, seed=1, h2d=h2d, head=zoo.HEAD_SUPERBENCH)


def test_bert_scores_100_classes_from_the_pooled_output() -> None:
    import torch

    torch.manual_seed(0)
    model = zoo.build(zoo.MODELS["bert-tiny"], head=zoo.HEAD_SUPERBENCH).eval()
    assert isinstance(model, heads.PooledClassifier)
    batch = _superbench_batch(torch, "bert-tiny")
    ids, labels = batch.tensors["input_ids"], batch.tensors["labels"]
    scores = model(ids)
    assert scores.shape == (BATCH, zoo.SUPERBENCH_CLASSES)
    pooled = model.encoder(ids).pooler_output
    torch.testing.assert_close(scores, model.head(pooled))
    assert model.head.in_features == zoo.MODELS["bert-tiny"].shape["hidden"]
    # No language-modelling head is left: the model is the bare encoder and the classifier.
    assert type(model.encoder).__name__ == "BertModel"
    loss = tasks.loss(torch, zoo.MODELS["bert-tiny"], model, batch.tensors, zoo.HEAD_SUPERBENCH)
    torch.testing.assert_close(loss, torch.nn.functional.cross_entropy(scores, labels))
    assert loss.ndim == 0 and torch.isfinite(loss)


def test_gpt2_scores_100_classes_from_the_last_position_of_the_last_hidden_state() -> None:
    import torch

    torch.manual_seed(0)
    model = zoo.build(zoo.MODELS["gpt2-tiny"], head=zoo.HEAD_SUPERBENCH).eval()
    assert isinstance(model, heads.LastPositionClassifier)
    batch = _superbench_batch(torch, "gpt2-tiny")
    ids, labels = batch.tensors["input_ids"], batch.tensors["labels"]
    scores = model(ids)
    assert scores.shape == (BATCH, zoo.SUPERBENCH_CLASSES)
    every_position = model.head(model.decoder(ids).last_hidden_state)
    assert every_position.shape == (BATCH, SEQ, zoo.SUPERBENCH_CLASSES)
    torch.testing.assert_close(scores, every_position[:, -1])
    assert type(model.decoder).__name__ == "GPT2Model"
    loss = tasks.loss(torch, zoo.MODELS["gpt2-tiny"], model, batch.tensors, zoo.HEAD_SUPERBENCH)
    torch.testing.assert_close(loss, torch.nn.functional.cross_entropy(scores, labels))


def test_superbench_batches_draw_its_token_ids_and_labels_and_keep_labels_resident() -> None:
    import torch

    batch = _superbench_batch(torch, "gpt2-tiny", h2d=True)
    ids, labels = batch.tensors["input_ids"], batch.tensors["labels"]
    assert ids.shape == (BATCH, SEQ) and labels.shape == (BATCH,)
    assert int(ids.max()) < tasks.SUPERBENCH_TOKEN_IDS
    assert int(labels.min()) >= 0 and int(labels.max()) < zoo.SUPERBENCH_CLASSES
    # With h2d every step copies the inputs; the labels stay where they were made.
    fetched = batch.fetcher(torch.device("meta"), h2d=True)()
    assert fetched["input_ids"].device.type == "meta"
    assert fetched["labels"] is labels


@pytest.mark.parametrize("name", ["bert-tiny", "gpt2-tiny"])
def test_fp16_cast_leaves_no_fp32_parameters(name: str) -> None:
    import torch

    model = Precision("fp16", cast=True).prepare(
        torch, zoo.build(zoo.MODELS[name], head=zoo.HEAD_SUPERBENCH))
    dtypes = {p.dtype for p in model.parameters()}
    assert dtypes == {torch.float16}


def test_heads_leave_classifiers_alone_and_count_per_sequence_layers_once() -> None:
    import torch

    for name in ("lstm-tiny", "resnet-tiny"):
        spec = zoo.MODELS[name]
        assert not spec.classifies_with(zoo.HEAD_SUPERBENCH)
        assert zoo.parameter_count(spec, head=zoo.HEAD_SUPERBENCH) == zoo.parameter_count(spec)
    spec = zoo.MODELS["bert-tiny"]
    model = zoo.build(spec, head=zoo.HEAD_SUPERBENCH)
    hidden = spec.shape["hidden"]
    pooler_and_head = hidden * hidden + hidden + hidden * zoo.SUPERBENCH_CLASSES + 100
    assert flops.per_sequence_parameters(model) == pooler_and_head
    counted = flops.model_flops(torch, spec, model, SEQ, 32)
    per_token = flops.matmul_parameters(torch, model) - pooler_and_head
    expected = (2 * per_token + 4 * spec.shape["layers"] * SEQ * hidden) * SEQ
    assert counted.forward_per_sample == expected + 2 * pooler_and_head


def test_superbench_optimizers_are_its_settings_in_the_default_implementation() -> None:
    import torch

    weight = [torch.nn.Parameter(torch.zeros(4))]
    adamw = tasks.make_optimizer(torch, zoo.MODELS["bert-base"], weight, "cpu", 1e-8,
                                 tasks.OPTIMIZER_SUPERBENCH)
    assert isinstance(adamw, torch.optim.AdamW) and not adamw.defaults.get("fused")
    assert adamw.defaults["lr"] == 1e-5 and adamw.defaults["betas"] == (0.9, 0.999)
    sgd = tasks.make_optimizer(torch, zoo.MODELS["lstm"], weight, "cpu", 1e-8,
                               tasks.OPTIMIZER_SUPERBENCH)
    assert isinstance(sgd, torch.optim.SGD) and not sgd.defaults.get("fused")
    assert (sgd.defaults["lr"], sgd.defaults["momentum"], sgd.defaults["weight_decay"],
            sgd.defaults["nesterov"]) == (1e-5, 0.9, 1e-4, True)


def test_per_step_throughput_is_the_mean_of_per_step_rates() -> None:
    # 32 samples per step in 0.1 s, 0.2 s and 0.4 s: 320, 160 and 80 samples/s.
    assert mean_step_throughput(32, [0.1, 0.2, 0.4]) == pytest.approx((320 + 160 + 80) / 3)
    # Total over total of the same steps is lower: 96 samples in 0.7 s, 137.1 samples/s.
    assert mean_step_throughput(32, [0.1, 0.2, 0.4]) > 96 / 0.7
    assert mean_step_throughput(8, [0.5]) == pytest.approx(16.0)
    with pytest.raises(ValueError):
        mean_step_throughput(8, [])


def test_train_reports_superbench_throughput_beside_its_own(execute) -> None:
    m = execute(train.BENCHMARK, model="bert-tiny", dtype="fp32", head="superbench",
                optimizer="superbench", superbench_steps=6, **TINY)
    assert m.status == "ok", m.reason
    d = m.details
    assert d["task"] == "sequence-classification" and "100 classes" in d["head"]
    assert d["optimizer"] == "AdamW"
    assert d["superbench_steps_timed"] == 6 and d["superbench_steps_stopped"] == "steps"
    seconds = d["superbench_step_seconds"]
    assert len(seconds) == 6 and d["superbench_samples_per_step"] == TINY["batch"]
    figure = m.figure("throughput_superbench")
    assert figure.unit == "sample/s"
    assert figure.value == pytest.approx(mean_step_throughput(TINY["batch"], seconds))
    assert m.figure("throughput").value > 0  # accelbench's own, from the windows
    assert d["loss_last"] < d["loss_first"]


def test_without_superbench_steps_there_is_no_superbench_figure(execute) -> None:
    m = execute(train.BENCHMARK, model="lstm-tiny", dtype="fp32", head="superbench", **TINY)
    assert m.status == "ok", m.reason
    assert m.figure("throughput_superbench") is None
    assert "superbench_step_seconds" not in m.details


CPU = DeviceInfo("cpu", None, "cpu", "cpu")
MI250X = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI250X/MI250", "gfx90a")


def _cases(device: DeviceInfo, bench: str) -> list[dict[str, Any]]:
    cases = expand(validate(RunRequest(suite="generations"), REGISTRY), device)
    return [dict(c.params) for c in cases if c.benchmark.name == bench]


def test_generations_measures_superbench_workloads_by_default() -> None:
    for bench in ("train", "train-ddp"):
        gpu = _cases(MI250X, bench)
        assert gpu
        for c in gpu:
            assert (c["head"], c["optimizer"], c["h2d"], c["superbench_steps"]) == (
                "superbench", "superbench", True, 128), c
        assert {c["model"] for c in gpu} >= {"bert-large", "gpt2-small", "gpt2-large", "lstm",
                                             "resnet50", "vgg19"}


def test_generations_on_a_cpu_is_a_small_slice_without_torchvision() -> None:
    cpu = _cases(CPU, "train")
    assert {c["model"] for c in cpu} == {"bert-tiny", "gpt2-tiny", "lstm-tiny"}
    for c in cpu:
        assert (c["head"], c["optimizer"], c["h2d"], c["dtype"]) == (
            "superbench", "superbench", False, "fp32")
        assert c["superbench_steps"] > 0
    assert {c["model"] for c in _cases(CPU, "train-ddp")} == {c["model"] for c in cpu}
