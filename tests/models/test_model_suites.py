"""The model cases of the suites, per device class."""

from __future__ import annotations

from typing import Any

from accelbench.benchmarks import REGISTRY
from accelbench.core.device import DeviceInfo
from accelbench.core.request import RunRequest
from accelbench.runner.plan import expand, suite_names, validate

CPU = DeviceInfo("cpu", None, "cpu", "cpu")
MI250X = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI250X/MI250", "gfx90a")
ISSUE_MODELS = {"bert-base", "bert-large", "gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl",
                "llama-1b", "lstm", "resnet50", "resnet101", "resnet152", "densenet169",
                "densenet201", "vgg11", "vgg16", "vit-b16"}


def _model_cases(suite: str, device: DeviceInfo, bench: str) -> list[dict[str, Any]]:
    cases = expand(validate(RunRequest(suite=suite), REGISTRY), device)
    return [dict(c.params) for c in cases if c.benchmark.name == bench]


def test_quick_has_one_small_training_and_one_small_inference_case_per_device_class() -> None:
    for device in (CPU, MI250X):
        [trained] = _model_cases("quick", device, "train")
        [inferred] = _model_cases("quick", device, "infer")
        if device is CPU:
            assert trained["model"].endswith("-tiny") and inferred["model"].endswith("-tiny")


def test_standard_trains_the_whole_zoo_on_gpus_in_three_precisions() -> None:
    cases = _model_cases("standard", MI250X, "train")
    assert {c["model"] for c in cases} >= ISSUE_MODELS
    for model in ISSUE_MODELS:
        assert {c["dtype"] for c in cases if c["model"] == model} >= {"fp32", "fp16", "bf16"}
    cpu = _model_cases("standard", CPU, "train")
    assert cpu and all(c["batch"] <= 8 for c in cpu)


def test_generations_uses_superbench_settings() -> None:
    assert "generations" in suite_names(REGISTRY)
    cases = _model_cases("generations", MI250X, "train")
    by_model: dict[str, list[dict[str, Any]]] = {}
    for c in cases:
        by_model.setdefault(c["model"], []).append(c)
    for model in ("bert-base", "bert-large"):
        assert {(c["batch"], c["seq"]) for c in by_model[model]} == {(32, 224)}
    assert {(c["batch"], c["seq"]) for c in by_model["gpt2-large"]} == {(8, 224)}
    assert {(c["batch"], c["seq"], c["config"]) for c in by_model["lstm"]} == {
        (224, 32, "input=224,hidden=1000")}
    for model in ("resnet50", "densenet201", "vgg19"):
        assert {(c["batch"], c["image"]) for c in by_model[model]} == {(32, 224)}
    # float32, and float16 as SuperBench runs it: the whole model cast to half.
    assert {(c["dtype"], c["cast"]) for c in cases} == {("fp32", False), ("fp16", True)}
    ddp = _model_cases("generations", MI250X, "train-ddp")
    assert len(ddp) == len(cases)


def test_quick_has_a_short_engines_slice_beside_eager_per_device_class() -> None:
    for device in (CPU, MI250X):
        engines = _model_cases("quick", device, "infer-engine")
        other = "torchscript" if device is CPU else "onnxruntime"
        assert {c["engine"] for c in engines} >= {"eager", other}
        assert len({(c["model"], c["dtype"], c["batch"]) for c in engines}) == 1  # paired
        serve = _model_cases("quick", device, "serve")
        assert serve and all(c["min_duration"] for c in serve)  # short LoadGen tests
    assert all(c["model"].endswith("-tiny") for c in _model_cases("quick", CPU, "infer-engine"))


def test_standard_runs_every_engine_on_the_issue_models_and_all_four_scenarios() -> None:
    engines = _model_cases("standard", MI250X, "infer-engine")
    for model in ("bert-base", "resnet50", "vit-b16"):
        assert {c["engine"] for c in engines if c["model"] == model} >= {
            "eager", "compile", "compile-max-autotune", "torchscript", "onnxruntime"}
    assert {c["engine"] for c in engines if c["model"] == "sd-unet"} >= {"eager", "compile"}
    assert any(c["engine"] == "int8" for c in engines)
    for device in (CPU, MI250X):
        serve = _model_cases("standard", device, "serve")
        assert {c["scenario"] for c in serve} == {"single-stream", "multi-stream", "offline",
                                                 "server"}
        assert all(c["min_duration"] == "" for c in serve)  # LoadGen's own defaults
        assert _model_cases("standard", device, "generate")


def test_generate_by_default_runs_a_decoder_built_from_its_config() -> None:
    from accelbench.benchmarks.models.zoo import MODELS

    model = REGISTRY.get("generate").resolve({})["model"]
    assert MODELS[model].task == "causal-lm", model
