"""torchvision on the device: built for this torch, its C++ operators, a ResNet, and
transforms v2 on device tensors.

- build: torchvision's version goes with this torch (`libraries`), its torch
  requirement is met, its CUDA/ROCm build is this torch's, and its operators registered
  with the dispatcher (torch.ops.torchvision.nms, roi_align, deform_conv2d, ...).
- nms: kept boxes of 300 random boxes, against a greedy NMS in float64 on the CPU:
  exactly the same boxes in the same order.
- roi-align: forward and backward (aligned, 2 samples per bin) against torchvision's own
  float64 CPU kernel; magnitude: the same op on |input| (its weights are positive).
- deform-conv2d: with random offsets and mask against the float64 CPU kernel (magnitude:
  the op on |input|, |weight|, |mask|), and with zero offsets and a mask of ones against
  aten.convolution in float64, which it must then equal.
- resnet: torchvision.models.resnet18(weights=None) in eval mode, fp32 with TF32 off,
  against the same model in float64 on the CPU; each logit within torch.testing's fp32
  tolerance of the largest logit, times RESNET_FACTOR (18 layers compound rounding).
- transforms-v2: flip, crop, ToDtype(scale) and Normalize on a uint8 image on the
  device against the same arithmetic by hand in float64, and an antialiased Resize
  against torchvision's float64 CPU result.

Each check skips, with the reason and the install line, where torchvision is missing or
was not built for this torch, or has no kernels for this device.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.validation.libraries import (
    device_unsupported,
    install_line,
    installed_build,
    load,
    require_built_for,
)
from accelbench.benchmarks.validation.modes import math_mode
from accelbench.benchmarks.validation.verdict import (
    TOLERANCE_SCALE,
    Tolerance,
    Verdict,
    compare,
    conclude,
    exact_verdict,
    tensors_verdict,
    tolerance_for,
)
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseResult, CaseSkipped
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark

if TYPE_CHECKING:
    import torch
    from torch import Tensor

VISION_CHECKS = ("build", "nms", "roi-align", "deform-conv2d", "resnet", "transforms-v2")
OPERATORS = ("nms", "roi_align", "roi_pool", "ps_roi_align", "ps_roi_pool", "deform_conv2d")
RESNET_FACTOR = 10.0
IOU_THRESHOLD = 0.5


@dataclass(frozen=True)
class TorchvisionParams:
    """The parameters of a torchvision case (`BENCHMARK.params`)."""

    check: str
    tolerance_scale: float


def measure(ctx: CaseContext, params: TorchvisionParams) -> CaseResult:
    import torch

    check = params.check
    torchvision = load("torchvision", torch)
    build = installed_build("torchvision", torchvision, torch)
    registered = _registered(torch, torchvision)
    missing = [op for op in OPERATORS if not registered.get(op)]
    if missing and not build.problems:
        build = replace(build, problems=(f"its C++ operators did not register: "
                                         f"{', '.join(missing)}",))
    require_built_for(build)
    details: dict[str, Any] = {"check": check, "torchvision": build.to_dict(),
                               "operators": registered}
    if check == "build":
        cuda = getattr(getattr(torchvision, "version", None), "cuda", None)
        details["torchvision_cuda"] = cuda
        return conclude(Verdict(None, None), details)
    device = torch.device(ctx.device.torch_device)
    tolerance = tolerance_for("fp32", params.tolerance_scale)
    try:
        with math_mode(torch, "fp32"):
            verdict = _CHECKS[check](torch, torchvision, device, tolerance,
                                     params.tolerance_scale)
    except (NotImplementedError, RuntimeError) as exc:
        if not device_unsupported(exc):
            raise
        line = install_line(["torchvision"], torch.__version__)
        raise CaseSkipped(f"torchvision has no {ctx.device.type} kernel for {check}: "
                          f"{str(exc).splitlines()[0][:200]}; install the build for this "
                          f"torch: {line}", details={"install": line}) from None
    return conclude(verdict, details)


def _registered(torch: ModuleType, torchvision: ModuleType) -> dict[str, bool]:
    namespace = getattr(torch.ops, "torchvision", None)
    out = {}
    for op in OPERATORS:
        try:
            out[op] = namespace is not None and getattr(namespace, op) is not None
        except (AttributeError, RuntimeError):
            out[op] = False
    return out


def _cpu64(torch: ModuleType, t: Tensor) -> Tensor:
    return t.detach().to("cpu").to(torch.float64)


def _nms(torch: ModuleType, tv: ModuleType, device: torch.device, tolerance: Tolerance,
         scale: float) -> Verdict:
    gen = torch.Generator().manual_seed(0)
    corner = torch.rand(300, 2, generator=gen) * 80
    size = torch.rand(300, 2, generator=gen) * 25 + 5
    boxes = torch.cat([corner, corner + size], dim=1)
    scores = torch.rand(300, generator=gen)
    kept = tv.ops.nms(boxes.to(device), scores.to(device), IOU_THRESHOLD).cpu().tolist()
    want = greedy_nms(torch, boxes.double(), scores.double(), IOU_THRESHOLD)
    wrong = len(set(kept) ^ set(want)) + (0 if set(kept) != set(want) or kept == want else 1)
    return exact_verdict(
        wrong, "boxes",
        f"wrong result: torchvision.ops.nms kept {len(kept)} boxes where greedy NMS in "
        f"float64 keeps {len(want)}; {len(set(kept) ^ set(want))} differ"
        + ("" if set(kept) != set(want) else ", in another order"))


def greedy_nms(torch: ModuleType, boxes: Tensor, scores: Tensor, threshold: float) -> list[int]:
    """Non-maximum suppression by its definition: the best box left, then drop every box
    overlapping it by more than `threshold` (IoU), until none is left."""
    order = scores.argsort(descending=True).tolist()
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    alive = torch.ones(len(order), dtype=torch.bool)
    keep = []
    for i in order:
        if not alive[i]:
            continue
        keep.append(i)
        low = torch.maximum(boxes[:, :2], boxes[i, :2])
        high = torch.minimum(boxes[:, 2:], boxes[i, 2:])
        inter = (high - low).clamp(min=0).prod(dim=1)
        iou = inter / (area + area[i] - inter)
        alive &= ~(iou > threshold)
    return keep


def _roi_align(torch: ModuleType, tv: ModuleType, device: torch.device, tolerance: Tolerance,
               scale: float) -> Verdict:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 8, 32, 32, generator=gen)
    corner = torch.rand(16, 2, generator=gen) * 20
    rois = torch.cat([torch.randint(0, 2, (16, 1), generator=gen).float(), corner,
                      corner + torch.rand(16, 2, generator=gen) * 10 + 2], dim=1)
    grad = torch.randn(16, 8, 7, 7, generator=gen)

    def run(inp: Tensor, boxes: Tensor, g: Tensor) -> tuple[Tensor, Tensor]:
        leaf = inp.detach().clone().requires_grad_()
        out = tv.ops.roi_align(leaf, boxes, (7, 7), 1.0, 2, True)
        (gx,) = torch.autograd.grad(out, (leaf,), g)
        return out.detach(), gx

    out, gx = run(x.to(device), rois.to(device), grad.to(device))
    want, want_gx = run(x.double(), rois.double(), grad.double())
    size, size_gx = run(x.double().abs(), rois.double(), grad.double().abs())
    return tensors_verdict(
        [compare(torch, "output", out, want, tolerance, size, "the op on |input|"),
         compare(torch, "grad_input", gx, want_gx, tolerance, size_gx, "the op on |grad|")],
        tolerance, "torchvision.ops.roi_align")


def _deform_conv2d(torch: ModuleType, tv: ModuleType, device: torch.device,
                   tolerance: Tolerance, scale: float) -> Verdict:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 8, 16, 16, generator=gen)
    w = torch.randn(16, 8, 3, 3, generator=gen)
    offset = (torch.rand(2, 18, 16, 16, generator=gen) - 0.5) * 3
    mask = torch.rand(2, 9, 16, 16, generator=gen)
    op = tv.ops.deform_conv2d
    on = {"device": device}
    got = op(x.to(**on), offset.to(**on), w.to(**on), padding=1, mask=mask.to(**on))
    want = op(x.double(), offset.double(), w.double(), padding=1, mask=mask.double())
    size = op(x.double().abs(), offset.double(), w.double().abs(), padding=1,
              mask=mask.double())
    zero = op(x.to(**on), torch.zeros_like(offset).to(**on), w.to(**on), padding=1,
              mask=torch.ones_like(mask).to(**on))

    def conv(a: Tensor, b: Tensor) -> Tensor:
        out: Tensor = torch.ops.aten.convolution(a, b, None, [1, 1], [1, 1], [1, 1], False,
                                                 [0, 0], 1)
        return out

    return tensors_verdict(
        [compare(torch, "output", got, want, tolerance, size, "the op on |x|, |w|, |mask|"),
         compare(torch, "output with zero offsets", zero, conv(x.double(), w.double()),
                 tolerance, conv(x.double().abs(), w.double().abs()), "|x| * |w|")],
        tolerance, "torchvision.ops.deform_conv2d")


def _resnet(torch: ModuleType, tv: ModuleType, device: torch.device, tolerance: Tolerance,
            scale: float) -> Verdict:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = tv.models.resnet18(weights=None, num_classes=10).eval()
    reference = copy.deepcopy(model).double()
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        got = model.to(device)(x.to(device))
        want = reference(x.double())
    deep = tolerance_for("fp32", scale, RESNET_FACTOR,
                         "18 layers compound the rounding of each")
    largest = torch.full_like(want, float(want.abs().max()))
    return tensors_verdict(
        [compare(torch, "logits", got, want, deep, largest, "the largest |logit|")],
        deep, "torchvision.models.resnet18 forward")


def _transforms(torch: ModuleType, tv: ModuleType, device: torch.device,
                tolerance: Tolerance, scale: float) -> Verdict:
    v2 = importlib.import_module("torchvision.transforms.v2")
    image = torch.randint(0, 256, (3, 60, 80), dtype=torch.uint8,
                          generator=torch.Generator().manual_seed(0))
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    pipeline = v2.Compose([v2.RandomHorizontalFlip(p=1.0), v2.CenterCrop((48, 64)),
                           v2.ToDtype(torch.float32, scale=True), v2.Normalize(mean, std)])
    got = pipeline(image.to(device))
    by_hand = image.double().flip(-1)[:, 6:54, 8:72] / 255.0
    by_hand = (by_hand - torch.tensor(mean, dtype=torch.float64)[:, None, None]) \
        / torch.tensor(std, dtype=torch.float64)[:, None, None]
    resize = v2.Resize((30, 40), antialias=True)
    resized = resize(image.to(device).float())
    want_resized = resize(image.double())
    return tensors_verdict(
        [compare(torch, "flip, crop, ToDtype, Normalize", got, by_hand, tolerance),
         compare(torch, "antialiased Resize", resized, want_resized, tolerance)],
        tolerance, "torchvision.transforms.v2 on the device")


_CHECKS: dict[str, Callable[[ModuleType, ModuleType, Any, Tolerance, float], Verdict]] = {
    "nms": _nms, "roi-align": _roi_align, "deform-conv2d": _deform_conv2d,
    "resnet": _resnet, "transforms-v2": _transforms,
}


BENCHMARK = Benchmark(
    name="torchvision",
    family="validation",
    summary="torchvision on the device: built for this torch, nms, roi_align, "
    "deform_conv2d, a ResNet forward, transforms v2 on device tensors",
    entry="accelbench.benchmarks.validation.vision:measure",
    sources=("accelbench.benchmarks.validation.verdict",
             "accelbench.benchmarks.validation.modes",
             "accelbench.benchmarks.validation.libraries"),
    params=(
        Param("check", "str", "build", help="what is checked", choices=VISION_CHECKS),
        TOLERANCE_SCALE,
    ),
    devices=("cpu", "cuda"),
    timeout_s=300.0,
    views=("accelbench.benchmarks.validation.view:sections",),
    typed=TorchvisionParams,
)
