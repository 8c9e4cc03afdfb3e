"""The model zoo: named shapes of real architectures, built with random weights.

Every model is built from a configuration: transformers' config classes for BERT, GPT-2
and LLaMA, torchvision's constructors (``weights=None``) for the CNNs and ViT,
torch.nn for the LSTM, and diffusers' UNet2DConditionModel for Stable Diffusion's UNet
(one denoising step of the latent). Nothing is ever downloaded. Each architecture also has a tiny
variant (``<arch>-tiny``) small enough to train for real on a laptop CPU in seconds.

BERT, GPT-2 and LLaMA can also be built with SuperBench's head instead of their own
(``head="superbench"``, see `heads`): a 100-class linear layer, trained as a classifier.
The CNNs, the LSTM and ViT classify already, so their head is the same either way.

A model's shape can be changed with overrides (``layers=4,hidden=1024``); the keys an
architecture accepts are listed in ``OVERRIDES``. This module imports torch only inside
the builders, so declarations can list the model names cheaply.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from accelbench.core.untrusted import is_decimal

if TYPE_CHECKING:
    from torch import nn

# What each architecture is trained on, and so which loss and inputs it gets.
TASKS = {
    "bert": "masked-lm",
    "gpt2": "causal-lm",
    "llama": "causal-lm",
    "lstm": "sequence-classification",
    "resnet": "image-classification",
    "densenet": "image-classification",
    "vgg": "image-classification",
    "vit": "image-classification",
    "unet": "denoising",
}
LANGUAGE_MODELS = ("bert", "gpt2", "llama")
CNNS = ("resnet", "densenet", "vgg")

# The heads a model can be trained with: its task's own (""), or SuperBench's classifier.
HEAD_TASK, HEAD_SUPERBENCH = "", "superbench"
HEADS = (HEAD_TASK, HEAD_SUPERBENCH)
SUPERBENCH_CLASSES = 100  # SuperBench's num_classes for BERT, GPT-2, LLaMA and the LSTM

# Shape keys an override may set, per architecture.
OVERRIDES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "bert": ("layers", "hidden", "heads", "intermediate", "vocab", "max_positions"),
    "gpt2": ("layers", "hidden", "heads", "vocab", "max_positions"),
    "llama": ("layers", "hidden", "heads", "kv_heads", "intermediate", "vocab",
              "max_positions"),
    "lstm": ("layers", "hidden", "input", "classes"),
    "resnet": ("classes",),
    "densenet": ("classes",),
    "vgg": ("classes",),
    "vit": ("layers", "hidden", "heads", "mlp", "patch", "classes"),
    "unet": ("latent", "context", "context_len"),
})


@dataclass(frozen=True)
class ModelSpec:
    """A named model: its architecture and shape (generic keys, see OVERRIDES)."""

    name: str
    arch: str
    shape: Mapping[str, Any]
    tiny: bool = False

    @property
    def task(self) -> str:
        return TASKS[self.arch]

    @property
    def is_language_model(self) -> bool:
        return self.arch in LANGUAGE_MODELS

    @property
    def is_cnn(self) -> bool:
        return self.arch in CNNS

    @property
    def is_vision(self) -> bool:
        return self.task == "image-classification"

    @property
    def uses_seq(self) -> bool:
        return self.is_language_model or self.arch == "lstm"

    @property
    def is_unet(self) -> bool:
        return self.arch == "unet"

    def classifies_with(self, head: str) -> bool:
        """Whether `head` replaces this language model's own head with a classifier."""
        return head == HEAD_SUPERBENCH and self.is_language_model

    def head_label(self, head: str) -> str:
        """What the model is trained to predict, in words."""
        if self.classifies_with(head):
            where = ("the pooled output" if self.arch == "bert"
                     else "the last hidden state, scores of the last position")
            return (f"SuperBench's: a linear layer of {SUPERBENCH_CLASSES} classes on "
                    f"{where}; cross-entropy against random labels")
        own = {"masked-lm": "masked-LM head and loss (15% of tokens masked)",
               "causal-lm": "LM head and next-token loss",
               "denoising": "predicted noise of one denoising step; MSE against random noise"}
        return own.get(self.task, f"its own classifier ({self.shape.get('classes')} classes)")

    def with_overrides(self, overrides: Mapping[str, int]) -> ModelSpec:
        allowed = OVERRIDES[self.arch]
        unknown = sorted(set(overrides) - set(allowed))
        if unknown:
            raise ValueError(f"{self.name} has no shape setting {unknown[0]!r} "
                             f"(settings: {', '.join(allowed)})")
        return ModelSpec(self.name, self.arch, {**self.shape, **overrides}, self.tiny)


def _spec(name: str, arch: str, tiny: bool = False, **shape: Any) -> ModelSpec:
    return ModelSpec(name, arch, MappingProxyType(shape), tiny)


_BERT_VOCAB, _GPT2_VOCAB = 30522, 50257
_TINY_VOCAB = 128

MODELS: Mapping[str, ModelSpec] = MappingProxyType({s.name: s for s in (
    _spec("bert-base", "bert", layers=12, hidden=768, heads=12, intermediate=3072,
          vocab=_BERT_VOCAB, max_positions=512),
    _spec("bert-large", "bert", layers=24, hidden=1024, heads=16, intermediate=4096,
          vocab=_BERT_VOCAB, max_positions=512),
    _spec("bert-tiny", "bert", True, layers=2, hidden=32, heads=2, intermediate=64,
          vocab=_TINY_VOCAB, max_positions=128),
    _spec("gpt2-small", "gpt2", layers=12, hidden=768, heads=12, vocab=_GPT2_VOCAB,
          max_positions=1024),
    _spec("gpt2-medium", "gpt2", layers=24, hidden=1024, heads=16, vocab=_GPT2_VOCAB,
          max_positions=1024),
    _spec("gpt2-large", "gpt2", layers=36, hidden=1280, heads=20, vocab=_GPT2_VOCAB,
          max_positions=1024),
    _spec("gpt2-xl", "gpt2", layers=48, hidden=1600, heads=25, vocab=_GPT2_VOCAB,
          max_positions=1024),
    _spec("gpt2-tiny", "gpt2", True, layers=2, hidden=32, heads=2, vocab=_TINY_VOCAB,
          max_positions=128),
    # LLaMA 3.2 1B (tied embeddings, grouped-query attention) and LLaMA 2 7B shapes.
    _spec("llama-1b", "llama", layers=16, hidden=2048, heads=32, kv_heads=8,
          intermediate=8192, vocab=128256, max_positions=8192, tied=True),
    _spec("llama-7b", "llama", layers=32, hidden=4096, heads=32, kv_heads=32,
          intermediate=11008, vocab=32000, max_positions=4096, tied=False),
    _spec("llama-tiny", "llama", True, layers=2, hidden=32, heads=4, kv_heads=2,
          intermediate=64, vocab=_TINY_VOCAB, max_positions=128, tied=False),
    # SuperBench's LSTM: 8 layers of 1024, 256 input features, 100 classes.
    _spec("lstm", "lstm", layers=8, hidden=1024, input=256, classes=100),
    _spec("lstm-tiny", "lstm", True, layers=2, hidden=32, input=16, classes=10),
    _spec("resnet50", "resnet", depth=50, classes=1000),
    _spec("resnet101", "resnet", depth=101, classes=1000),
    _spec("resnet152", "resnet", depth=152, classes=1000),
    _spec("resnet-tiny", "resnet", True, depth=10, classes=10),  # resnet18 blocks, one per stage
    _spec("densenet169", "densenet", depth=169, classes=1000),
    _spec("densenet201", "densenet", depth=201, classes=1000),
    _spec("densenet-tiny", "densenet", True, depth=0, classes=10),
    _spec("vgg11", "vgg", depth=11, classes=1000),
    _spec("vgg13", "vgg", depth=13, classes=1000),
    _spec("vgg16", "vgg", depth=16, classes=1000),
    _spec("vgg19", "vgg", depth=19, classes=1000),
    _spec("vgg-tiny", "vgg", True, depth=0, classes=10),
    _spec("vit-b16", "vit", layers=12, hidden=768, heads=12, mlp=3072, patch=16, classes=1000),
    _spec("vit-tiny", "vit", True, layers=2, hidden=32, heads=2, mlp=64, patch=8, classes=10),
    # Stable Diffusion 1.x's UNet: a 64x64x4 latent (512x512 images), CLIP ViT-L/14's 77
    # tokens of 768 as the text condition; diffusers' default blocks (320..1280 channels).
    _spec("sd-unet", "unet", latent=64, context=768, context_len=77),
    _spec("sd-unet-tiny", "unet", True, latent=8, context=16, context_len=8),
)})

MODEL_NAMES: tuple[str, ...] = tuple(MODELS)


def get_spec(name: str, overrides: str = "") -> ModelSpec:
    """The named model with the overrides applied; ValueError for bad input."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r} (models: {', '.join(MODELS)})")
    return MODELS[name].with_overrides(parse_overrides(overrides))


def parse_overrides(text: str) -> dict[str, int]:
    """``"layers=4,hidden=1024"`` -> {"layers": 4, "hidden": 1024}; ValueError if malformed."""
    out: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key or not is_decimal(value.strip()) or int(value) < 1:
            raise ValueError(f"bad shape setting {item!r}: use key=positive-integer")
        out[key] = int(value)
    return out


def overrides_problem(text: str) -> str | None:
    """Parameter check for the overrides string (syntax only; keys are checked per model)."""
    try:
        overrides = parse_overrides(text)
    except ValueError as exc:
        return str(exc)
    known = {key for keys in OVERRIDES.values() for key in keys}
    unknown = sorted(set(overrides) - known)
    return f"unknown shape setting {unknown[0]!r}" if unknown else None


# --- builders (import torch, transformers, torchvision) ---------------------------------


def build(spec: ModelSpec, image: int = 224, head: str = HEAD_TASK) -> nn.Module:
    """A freshly initialised torch.nn.Module for spec, on the current default device.

    Use ``with torch.device("meta"):`` around it to describe a model without allocating
    it (parameter counts of the 7B shape, FLOP counting). With SuperBench's head a
    language model takes token ids and returns class scores (batch, classes).
    """
    if head not in HEADS:
        raise ValueError(f"unknown head {head!r} (heads: {HEADS})")
    if spec.classifies_with(head):
        return _superbench_classifier(spec)
    return _BUILDERS[spec.arch](spec, image)


def _offline() -> None:
    # Built from configs, transformers and diffusers have nothing to fetch; make sure
    # they never try.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("DIFFUSERS_OFFLINE", "1")


def _bert_config(spec: ModelSpec) -> Any:
    _offline()
    from transformers import BertConfig

    s = spec.shape
    return BertConfig(vocab_size=s["vocab"], hidden_size=s["hidden"],
                      num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
                      intermediate_size=s["intermediate"],
                      max_position_embeddings=s["max_positions"])


def _gpt2_config(spec: ModelSpec) -> Any:
    _offline()
    from transformers import GPT2Config

    s = spec.shape
    return GPT2Config(vocab_size=s["vocab"], n_embd=s["hidden"], n_layer=s["layers"],
                      n_head=s["heads"], n_positions=s["max_positions"], use_cache=False,
                      bos_token_id=s["vocab"] - 1, eos_token_id=s["vocab"] - 1)


def _llama_config(spec: ModelSpec) -> Any:
    _offline()
    from transformers import LlamaConfig

    s = spec.shape
    return LlamaConfig(vocab_size=s["vocab"], hidden_size=s["hidden"],
                       intermediate_size=s["intermediate"], num_hidden_layers=s["layers"],
                       num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"],
                       max_position_embeddings=s["max_positions"],
                       tie_word_embeddings=bool(s.get("tied", False)), use_cache=False)


def _bert(spec: ModelSpec, image: int) -> nn.Module:
    from transformers import BertForMaskedLM

    return BertForMaskedLM(_bert_config(spec))


def _gpt2(spec: ModelSpec, image: int) -> nn.Module:
    from transformers import GPT2LMHeadModel

    model = GPT2LMHeadModel(_gpt2_config(spec))
    model.loss_type = "ForCausalLM"  # what transformers falls back to, after a warning
    return model


def _llama(spec: ModelSpec, image: int) -> nn.Module:
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM(_llama_config(spec))


def _superbench_classifier(spec: ModelSpec) -> nn.Module:
    """The bare transformer (no LM head) with SuperBench's 100-class head (see heads)."""
    from accelbench.benchmarks.models import heads

    hidden = spec.shape["hidden"]
    if spec.arch == "bert":
        from transformers import BertModel

        return heads.PooledClassifier(BertModel(_bert_config(spec)), hidden,
                                      SUPERBENCH_CLASSES)
    if spec.arch == "gpt2":
        from transformers import GPT2Model

        decoder: nn.Module = GPT2Model(_gpt2_config(spec))
    else:
        from transformers import LlamaModel

        decoder = LlamaModel(_llama_config(spec))
    return heads.LastPositionClassifier(decoder, hidden, SUPERBENCH_CLASSES)


def _lstm(spec: ModelSpec, image: int) -> nn.Module:
    from accelbench.benchmarks.models.lstm import LSTMClassifier

    s = spec.shape
    return LSTMClassifier(s["input"], s["hidden"], s["layers"], s["classes"])


def _resnet(spec: ModelSpec, image: int) -> nn.Module:
    from torchvision import models
    from torchvision.models.resnet import BasicBlock, ResNet

    depth, classes = spec.shape["depth"], spec.shape["classes"]
    if depth == 10:
        return ResNet(BasicBlock, [1, 1, 1, 1], num_classes=classes)
    return getattr(models, f"resnet{depth}")(weights=None, num_classes=classes)


def _densenet(spec: ModelSpec, image: int) -> nn.Module:
    from torchvision import models
    from torchvision.models.densenet import DenseNet

    depth, classes = spec.shape["depth"], spec.shape["classes"]
    if depth == 0:
        return DenseNet(growth_rate=8, block_config=(2, 2, 2, 2), num_init_features=16,
                        bn_size=2, num_classes=classes)
    return getattr(models, f"densenet{depth}")(weights=None, num_classes=classes)


def _vgg(spec: ModelSpec, image: int) -> nn.Module:
    from torchvision import models

    depth, classes = spec.shape["depth"], spec.shape["classes"]
    if depth == 0:
        return _tiny_vgg(classes)
    return getattr(models, f"vgg{depth}")(weights=None, num_classes=classes)


def _tiny_vgg(classes: int) -> nn.Module:
    """torchvision's VGG feature stack at a small width, with a small classifier.

    torchvision's VGG class fixes a 25088 -> 4096 -> 4096 classifier (120M parameters),
    so the tiny variant keeps VGG's layers and swaps only the sizes.
    """
    from collections import OrderedDict

    from torch import nn
    from torchvision.models.vgg import make_layers

    return nn.Sequential(OrderedDict(
        features=make_layers([8, "M", 16, "M", 32, 32, "M"]),
        avgpool=nn.AdaptiveAvgPool2d((1, 1)),
        flatten=nn.Flatten(),
        classifier=nn.Sequential(nn.Linear(32, 64), nn.ReLU(True), nn.Dropout(),
                                 nn.Linear(64, classes)),
    ))


def _vit(spec: ModelSpec, image: int) -> nn.Module:
    from torchvision.models.vision_transformer import VisionTransformer

    s = spec.shape
    if image % s["patch"]:
        raise ValueError(f"{spec.name}: image size {image} is not a multiple of the "
                         f"patch size {s['patch']}")
    return VisionTransformer(image_size=image, patch_size=s["patch"], num_layers=s["layers"],
                             num_heads=s["heads"], hidden_dim=s["hidden"], mlp_dim=s["mlp"],
                             num_classes=s["classes"])


def _unet(spec: ModelSpec, image: int) -> nn.Module:
    """diffusers' UNet2DConditionModel from its config: Stable Diffusion 1.x's blocks (the
    class's defaults), or a tiny one with the same block types at a small width."""
    _offline()
    from diffusers import UNet2DConditionModel

    s = spec.shape
    unet: Any = UNet2DConditionModel  # diffusers annotates its config decorator loosely
    if not spec.tiny:
        model: nn.Module = unet(sample_size=s["latent"], cross_attention_dim=s["context"])
        return model
    model = unet(
        sample_size=s["latent"], layers_per_block=1, block_out_channels=(16, 32),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=s["context"], attention_head_dim=4, norm_num_groups=8)
    return model


_BUILDERS: Mapping[str, Callable[[ModelSpec, int], nn.Module]] = MappingProxyType({
    "bert": _bert, "gpt2": _gpt2, "llama": _llama, "lstm": _lstm, "resnet": _resnet,
    "densenet": _densenet, "vgg": _vgg, "vit": _vit, "unet": _unet,
})


def parameter_count(spec: ModelSpec, image: int = 224, head: str = HEAD_TASK) -> int:
    """Parameters of the model, counted on the meta device (nothing is allocated)."""
    import torch

    with torch.device("meta"):
        model = build(spec, image, head)
    return sum(p.numel() for p in model.parameters())
