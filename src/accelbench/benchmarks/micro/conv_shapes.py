"""Convolution problems, written by hand or named after the layers of real networks.

A named layer is `NETWORK.MODULE`, where MODULE is the module's name in the torchvision
model (`resnet50.layer1.0.conv2` is `torchvision.models.resnet50().layer1[0].conv2`), at
the network's standard input size (224x224 images; 16 frames of 112x112 for r3d_18).
Each distinct problem is listed once, under the first module that has it; `occurs` says
how many convolutions of the network share it (ResNet-50's 53 convolutions are 23
distinct problems). The batch size is not part of a layer: it is a parameter of its own.

A custom problem is written `C:HxW:K:RxS[:STRIDE[:PAD[:GROUPS[:DILATION]]]]` (colons,
since commas separate several values on the command line): C input channels, an HxW
input, K output channels, an RxS kernel; STRIDE, PAD and DILATION are one number or one
per spatial dimension (`1x2`). Three spatial sizes (`DxHxW`, kernel `TxRxS`) make it a
3-D convolution. Missing fields default to stride 1, no padding, 1 group, dilation 1.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass

from accelbench.core.untrusted import is_decimal


@dataclass(frozen=True)
class ConvLayer:
    """One convolution problem, without its batch size."""

    in_channels: int
    size: tuple[int, ...]  # input spatial size: (H, W) or (D, H, W)
    out_channels: int
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    groups: int = 1
    dilation: tuple[int, ...] = ()  # empty: 1 in every dimension
    occurs: int = 1  # convolutions of the network with this problem (1 for custom ones)

    def __post_init__(self) -> None:
        if not self.dilation:
            object.__setattr__(self, "dilation", (1,) * len(self.size))

    @property
    def dims(self) -> int:
        """Spatial dimensions: 2 or 3."""
        return len(self.size)

    @property
    def output_size(self) -> tuple[int, ...]:
        return tuple(
            (n + 2 * p - d * (k - 1) - 1) // s + 1
            for n, k, s, p, d in zip(
                self.size, self.kernel, self.stride, self.padding, self.dilation, strict=True
            )
        )

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.groups == self.in_channels

    def flop(self, batch: int) -> int:
        """Floating-point operations of one pass in any direction (forward, backward-data,
        backward-weight): 2 * N * K * prod(output size) * (C / groups) * prod(kernel)."""
        return (
            2
            * batch
            * self.out_channels
            * math.prod(self.output_size)
            * (self.in_channels // self.groups)
            * math.prod(self.kernel)
        )

    def describe(self) -> str:
        """`3x3/2 128->128 @56x56 -> 28x28, pad 1, groups 32`."""
        text = (
            f"{_dims(self.kernel)}/{_dims(self.stride, short=True)} "
            f"{self.in_channels}->{self.out_channels} @{_dims(self.size)} -> "
            f"{_dims(self.output_size)}"
        )
        if any(self.padding):
            text += f", pad {_dims(self.padding, short=True)}"
        if self.groups > 1:
            text += ", depthwise" if self.depthwise else f", groups {self.groups}"
        if any(d != 1 for d in self.dilation):
            text += f", dilation {_dims(self.dilation, short=True)}"
        return text

    def problem(self) -> str | None:
        """Why this is not a valid convolution, or None."""
        dims = self.dims
        if dims not in (2, 3):
            return f"2 or 3 spatial dimensions are measured, not {dims}"
        for name, values in (("kernel", self.kernel), ("stride", self.stride),
                             ("padding", self.padding), ("dilation", self.dilation)):
            if len(values) != dims:
                return f"{name} has {len(values)} dimensions, the input {dims}"
        if min(self.in_channels, self.out_channels, self.groups, *self.size, *self.kernel,
               *self.stride, *self.dilation) < 1:
            return "channels, sizes, kernel, stride, groups and dilation must be at least 1"
        if min(self.padding) < 0:
            return "padding must not be negative"
        if self.in_channels % self.groups or self.out_channels % self.groups:
            return (
                f"groups ({self.groups}) must divide both the input channels "
                f"({self.in_channels}) and the output channels ({self.out_channels})"
            )
        if min(self.output_size) < 1:
            return f"the kernel does not fit the padded input (output size {self.output_size})"
        return None


def _dims(values: tuple[int, ...], short: bool = False) -> str:
    if short and len(set(values)) == 1:
        return str(values[0])
    return "x".join(map(str, values))


def _c2(cin: int, hw: int, cout: int, k: int, stride: int = 1, pad: int = 0,
        groups: int = 1, occurs: int = 1) -> ConvLayer:
    """A square 2-D layer."""
    return ConvLayer(cin, (hw, hw), cout, (k, k), (stride, stride), (pad, pad), groups,
                     occurs=occurs)


def _c3(cin: int, dhw: tuple[int, int, int], cout: int, k: tuple[int, int, int],
        stride: tuple[int, int, int], pad: tuple[int, int, int], occurs: int = 1) -> ConvLayer:
    return ConvLayer(cin, dhw, cout, k, stride, pad, occurs=occurs)


# Every distinct convolution of each network, or a stated selection, in network order.
NETWORKS: dict[str, dict[str, ConvLayer]] = {
    # ResNet-50 (v1.5, stride in the 3x3): all 23 distinct problems of its 53 convolutions.
    "resnet50": {
        "conv1": _c2(3, 224, 64, 7, 2, 3),
        "layer1.0.conv1": _c2(64, 56, 64, 1),
        "layer1.0.conv2": _c2(64, 56, 64, 3, 1, 1, occurs=3),
        "layer1.0.conv3": _c2(64, 56, 256, 1, occurs=4),  # and layer1.0.downsample.0
        "layer1.1.conv1": _c2(256, 56, 64, 1, occurs=2),
        "layer2.0.conv1": _c2(256, 56, 128, 1),
        "layer2.0.conv2": _c2(128, 56, 128, 3, 2, 1),
        "layer2.0.conv3": _c2(128, 28, 512, 1, occurs=4),
        "layer2.0.downsample.0": _c2(256, 56, 512, 1, 2),
        "layer2.1.conv1": _c2(512, 28, 128, 1, occurs=3),
        "layer2.1.conv2": _c2(128, 28, 128, 3, 1, 1, occurs=3),
        "layer3.0.conv1": _c2(512, 28, 256, 1),
        "layer3.0.conv2": _c2(256, 28, 256, 3, 2, 1),
        "layer3.0.conv3": _c2(256, 14, 1024, 1, occurs=6),
        "layer3.0.downsample.0": _c2(512, 28, 1024, 1, 2),
        "layer3.1.conv1": _c2(1024, 14, 256, 1, occurs=5),
        "layer3.1.conv2": _c2(256, 14, 256, 3, 1, 1, occurs=5),
        "layer4.0.conv1": _c2(1024, 14, 512, 1),
        "layer4.0.conv2": _c2(512, 14, 512, 3, 2, 1),
        "layer4.0.conv3": _c2(512, 7, 2048, 1, occurs=3),
        "layer4.0.downsample.0": _c2(1024, 14, 2048, 1, 2),
        "layer4.1.conv1": _c2(2048, 7, 512, 1, occurs=2),
        "layer4.1.conv2": _c2(512, 7, 512, 3, 1, 1, occurs=2),
    },
    # VGG-16: all 9 distinct 3x3 problems of its 13 convolutions.
    "vgg16": {
        "features.0": _c2(3, 224, 64, 3, 1, 1),
        "features.2": _c2(64, 224, 64, 3, 1, 1),
        "features.5": _c2(64, 112, 128, 3, 1, 1),
        "features.7": _c2(128, 112, 128, 3, 1, 1),
        "features.10": _c2(128, 56, 256, 3, 1, 1),
        "features.12": _c2(256, 56, 256, 3, 1, 1, occurs=2),
        "features.17": _c2(256, 28, 512, 3, 1, 1),
        "features.19": _c2(512, 28, 512, 3, 1, 1, occurs=2),
        "features.24": _c2(512, 14, 512, 3, 1, 1, occurs=3),
    },
    # DenseNet-121, a selection: the 3x3 growth convolution of each dense block (128 -> 32
    # channels), the widest and narrowest 1x1 bottlenecks, and a transition.
    "densenet121": {
        "features.denseblock1.denselayer1.conv2": _c2(128, 56, 32, 3, 1, 1, occurs=6),
        "features.denseblock1.denselayer6.conv1": _c2(224, 56, 128, 1),
        "features.transition1.conv": _c2(256, 56, 128, 1),
        "features.denseblock2.denselayer1.conv2": _c2(128, 28, 32, 3, 1, 1, occurs=12),
        "features.denseblock3.denselayer1.conv2": _c2(128, 14, 32, 3, 1, 1, occurs=24),
        "features.denseblock3.denselayer24.conv1": _c2(992, 14, 128, 1),
        "features.denseblock4.denselayer1.conv2": _c2(128, 7, 32, 3, 1, 1, occurs=16),
    },
    # MobileNetV2, a selection: depthwise 3x3 convolutions at each resolution, and the
    # first pointwise expansion.
    "mobilenet_v2": {
        "features.1.conv.0.0": _c2(32, 112, 32, 3, 1, 1, groups=32),
        "features.2.conv.0.0": _c2(16, 112, 96, 1),
        "features.2.conv.1.0": _c2(96, 112, 96, 3, 2, 1, groups=96),
        "features.3.conv.1.0": _c2(144, 56, 144, 3, 1, 1, groups=144),
        "features.8.conv.1.0": _c2(384, 14, 384, 3, 1, 1, groups=384, occurs=4),
        "features.15.conv.1.0": _c2(960, 7, 960, 3, 1, 1, groups=960, occurs=3),
    },
    # ResNeXt-50 32x4d, a selection: its grouped 3x3 convolutions (32 groups).
    "resnext50_32x4d": {
        "layer1.0.conv2": _c2(128, 56, 128, 3, 1, 1, groups=32, occurs=3),
        "layer2.1.conv2": _c2(256, 28, 256, 3, 1, 1, groups=32, occurs=3),
        "layer3.1.conv2": _c2(512, 14, 512, 3, 1, 1, groups=32, occurs=5),
        "layer4.1.conv2": _c2(1024, 7, 1024, 3, 1, 1, groups=32, occurs=2),
    },
    # R3D-18 (3-D ResNet for video, 16 frames of 112x112), a selection of 3-D problems.
    "r3d_18": {
        "stem.0": _c3(3, (16, 112, 112), 64, (3, 7, 7), (1, 2, 2), (1, 3, 3)),
        "layer1.0.conv1.0": _c3(64, (16, 56, 56), 64, (3, 3, 3), (1, 1, 1), (1, 1, 1),
                                occurs=4),
        "layer2.0.conv2.0": _c3(128, (8, 28, 28), 128, (3, 3, 3), (1, 1, 1), (1, 1, 1),
                                occurs=3),
        "layer3.0.conv2.0": _c3(256, (4, 14, 14), 256, (3, 3, 3), (1, 1, 1), (1, 1, 1),
                                occurs=3),
        "layer4.0.conv2.0": _c3(512, (2, 7, 7), 512, (3, 3, 3), (1, 1, 1), (1, 1, 1),
                                occurs=3),
    },
}

NAMED_LAYERS: dict[str, ConvLayer] = {
    f"{network}.{module}": layer
    for network, layers in NETWORKS.items()
    for module, layer in layers.items()
}

FORMS = (
    "a named layer NETWORK.MODULE (e.g. resnet50.layer1.0.conv2; networks: "
    f"{', '.join(NETWORKS)}) or C:HxW:K:RxS[:STRIDE[:PAD[:GROUPS[:DILATION]]]] "
    "(e.g. 64:56x56:64:3x3:1:1; DxHxW and TxRxS for 3-D)"
)


def layer_names(network: str | None = None) -> list[str]:
    """Every named layer, or those of one network, in declaration order."""
    if network is None:
        return list(NAMED_LAYERS)
    return [f"{network}.{module}" for module in NETWORKS[network]]


def parse_layer(text: str) -> ConvLayer:
    """The layer named or written in `text`; ValueError says what is wrong.

    Only the exact spelling is accepted, so one layer has one case identity.
    """
    spec = text
    if spec in NAMED_LAYERS:
        return NAMED_LAYERS[spec]
    if ":" not in spec:
        raise ValueError(f"not a convolution layer; {_hint(spec)}use {FORMS}")
    fields = spec.split(":")
    if not 4 <= len(fields) <= 8:
        raise ValueError(f"a custom layer has 4 to 8 ':'-separated fields; use {FORMS}")
    try:
        cin = _number(fields[0])
        size = _sizes(fields[1])
        cout = _number(fields[2])
        kernel = _sizes(fields[3], len(size))
        dims = len(size)
        stride = _sizes(fields[4], dims) if len(fields) > 4 else (1,) * dims
        padding = _sizes(fields[5], dims, minimum=0) if len(fields) > 5 else (0,) * dims
        groups = _number(fields[6]) if len(fields) > 6 else 1
        dilation = _sizes(fields[7], dims) if len(fields) > 7 else (1,) * dims
    except ValueError as e:
        raise ValueError(f"{e}; use {FORMS}") from None
    layer = ConvLayer(cin, size, cout, kernel, stride, padding, groups, dilation)
    problem = layer.problem()
    if problem:
        raise ValueError(f"{problem}; use {FORMS}")
    return layer


def layer_problem(text: str) -> str | None:
    """Param check: why `text` is not a convolution layer, or None when it is one."""
    try:
        parse_layer(text)
    except ValueError as e:
        return str(e)
    return None


def _number(text: str, minimum: int = 1) -> int:
    if not is_decimal(text) or int(text) < minimum:
        raise ValueError(f"{text!r} is not an integer of at least {minimum}")
    return int(text)


def _sizes(text: str, dims: int | None = None, minimum: int = 1) -> tuple[int, ...]:
    """`3`, `3x3` or `3x3x3`; a single number is repeated to `dims` dimensions."""
    values = tuple(_number(part, minimum) for part in text.split("x"))
    if dims is None:
        if len(values) not in (2, 3):
            raise ValueError(f"the input size {text!r} must be HxW or DxHxW")
        return values
    if len(values) == 1:
        return values * dims
    if len(values) != dims:
        raise ValueError(f"{text!r} has {len(values)} dimensions, the input {dims}")
    return values


def _hint(name: str) -> str:
    name = name.strip().lower()
    if name in NAMED_LAYERS:
        return f"did you mean {name}? "
    network, _, module = name.partition(".")
    if network in NETWORKS and module:
        close = difflib.get_close_matches(name, layer_names(network), n=1)
        if close:
            return f"did you mean {close[0]}? "
        return f"{network} has {', '.join(NETWORKS[network])}; "
    close = difflib.get_close_matches(name, NAMED_LAYERS, n=1)
    return f"did you mean {close[0]}? " if close else ""
