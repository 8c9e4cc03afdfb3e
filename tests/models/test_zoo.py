"""The model zoo: every named model builds from its config, full sizes without memory."""

from __future__ import annotations

import pytest

from accelbench.benchmarks.models import zoo

# Published parameter counts (transformers' and torchvision's model cards), in millions.
# BERT counts include the masked-LM head's transform; GPT-2 and LLaMA-1B tie their
# output embedding to the input one.
FULL_SIZES = {
    "bert-base": 109.5, "bert-large": 335.2,
    "gpt2-small": 124.4, "gpt2-medium": 354.8, "gpt2-large": 774.0, "gpt2-xl": 1557.6,
    "llama-1b": 1235.8, "llama-7b": 6738.4,
    "lstm": 64.1,
    "resnet50": 25.6, "resnet101": 44.5, "resnet152": 60.2,
    "densenet169": 14.15, "densenet201": 20.0,
    "vgg11": 132.9, "vgg13": 133.0, "vgg16": 138.4, "vgg19": 143.7,
    "vit-b16": 86.6,
}
ARCHITECTURES = ("bert", "gpt2", "llama", "lstm", "resnet", "densenet", "vgg", "vit")


def test_the_zoo_has_every_named_model_and_a_tiny_variant_of_each_architecture() -> None:
    assert set(FULL_SIZES) <= set(zoo.MODEL_NAMES)
    assert {f"{arch}-tiny" for arch in ARCHITECTURES} <= set(zoo.MODEL_NAMES)
    assert {zoo.MODELS[f"{arch}-tiny"].arch for arch in ARCHITECTURES} == set(ARCHITECTURES)
    assert all(zoo.MODELS[f"{arch}-tiny"].tiny for arch in ARCHITECTURES)


@pytest.mark.parametrize(("name", "millions"), FULL_SIZES.items())
def test_full_size_models_build_on_the_meta_device_with_their_published_size(
    name: str, millions: float
) -> None:
    import torch

    with torch.device("meta"):
        model = zoo.build(zoo.MODELS[name])
    assert all(p.is_meta for p in model.parameters())  # nothing was allocated
    count = sum(p.numel() for p in model.parameters())
    assert count == pytest.approx(millions * 1e6, rel=0.002)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_tiny_variants_are_small(arch: str) -> None:
    assert zoo.parameter_count(zoo.MODELS[f"{arch}-tiny"], image=32) < 5_000_000


def test_shapes_are_configurable() -> None:
    spec = zoo.get_spec("llama-7b", "layers=2,hidden=512,heads=8,kv_heads=8,intermediate=1024")
    assert spec.shape["layers"] == 2 and spec.shape["vocab"] == 32000
    assert zoo.parameter_count(spec) < zoo.parameter_count(zoo.MODELS["llama-7b"]) / 100
    lstm = zoo.get_spec("lstm", "input=224,hidden=1000")
    assert (lstm.shape["input"], lstm.shape["hidden"], lstm.shape["layers"]) == (224, 1000, 8)


@pytest.mark.parametrize(
    ("name", "overrides", "message"),
    [
        ("gpt3", "", "unknown model 'gpt3'"),
        ("resnet50", "layers=4", "resnet50 has no shape setting 'layers'"),
        ("bert-base", "layers=four", "bad shape setting"),
        ("bert-base", "layers", "bad shape setting"),
        ("bert-base", "layers=0", "bad shape setting"),
    ],
)
def test_bad_models_and_shapes_are_refused(name: str, overrides: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        zoo.get_spec(name, overrides)


def test_the_overrides_parameter_checks_syntax_and_known_keys() -> None:
    assert zoo.overrides_problem("") is None
    assert zoo.overrides_problem("layers=2, hidden=64") is None
    unknown = zoo.overrides_problem("depth=3")
    assert unknown is not None and "unknown shape setting 'depth'" in unknown
    negative = zoo.overrides_problem("layers=-1")
    assert negative is not None and "bad shape setting" in negative


def test_vit_needs_an_image_made_of_whole_patches() -> None:
    import torch

    with torch.device("meta"), pytest.raises(ValueError, match="not a multiple"):
        zoo.build(zoo.MODELS["vit-b16"], image=200)
