"""From a case's parameters to a model setup, refusing what cannot or need not run."""

from __future__ import annotations

import math
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from accelbench.benchmarks.mathmode import MathMode
from accelbench.benchmarks.models import tasks, zoo
from accelbench.benchmarks.models.precision import Precision
from accelbench.benchmarks.models.trainer import ModelSetup
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseFailed, CaseSkipped

T = TypeVar("T")


def model_setup(ctx: CaseContext, model: str, config: str, dtype: str, batch: int, seq: int,
                image: int, *, cast: bool = False, channels_last: bool = False,
                compile: bool = False, h2d: bool = False, head: str = zoo.HEAD_TASK,
                optimizer: str = tasks.OPTIMIZER_FUSED) -> ModelSetup:
    """The setup a case asks for (an option its benchmark does not have is off);
    CaseSkipped where an option does not apply, CaseFailed where the device cannot run it
    (unsupported precision) or the model is not valid."""
    try:
        spec = zoo.get_spec(model, config)
    except ValueError as exc:
        raise CaseFailed(f"model {model!r} cannot be built: {exc}") from None
    precision = Precision(dtype, cast)
    if not precision.applies:
        raise CaseSkipped("cast applies to fp16 and bf16 only")
    if channels_last and not spec.is_cnn:
        raise CaseSkipped(f"channels_last applies to CNNs only, not to {spec.arch}")
    if h2d and ctx.device.type == "cpu":
        raise CaseSkipped("h2d: the CPU has no host-to-device copy")
    problem = precision.problem(ctx.device)
    if problem:  # a precision the device lacks: the case does not apply here
        raise CaseSkipped(f"unsupported precision: {problem}")
    if spec.is_language_model and seq > spec.shape["max_positions"]:
        raise CaseFailed(f"seq {seq} is longer than {spec.name}'s "
                         f"{spec.shape['max_positions']} positions")
    return ModelSetup(spec, precision, batch, seq, image, channels_last, compile, h2d,
                      head=head, optimizer=optimizer)


def check_math_mode(mode: MathMode, precision: Precision) -> None:
    """Skip an fp32 or tf32 case whose matmuls do not run the float32 math it asked for
    (TF32 not in effect for tf32, or not off for fp32): its MFU would be against the
    wrong peak. The half types run their matrix math in fp16/bf16 either way."""
    problem = mode.problem() if precision.dtype in ("fp32", "tf32") else None
    if problem:
        raise CaseSkipped(problem)


def check_lstm_precision(torch: ModuleType, setup: ModelSetup, device: Any) -> None:
    """Skip an LSTM case whose half precision the device's LSTM kernels cannot run.

    oneDNN has no bf16 LSTM for CPUs without AVX-512 BF16 (AVX2-only EPYC and Xeon
    parts): PyTorch raises "could not create a primitive descriptor for the LSTM forward
    propagation primitive" from the model's first step. One step forward and back of a
    four-wide LSTM, run as the case would run it, tells before the model is built, and
    the case is skipped as an unsupported precision (as tf32 on a CPU is), not a crash."""
    precision = setup.precision
    if setup.spec.arch != "lstm" or precision.dtype not in ("fp16", "bf16"):
        return
    probe = precision.prepare(torch, torch.nn.LSTM(4, 4)).to(device)
    x = torch.zeros(2, 1, 4, dtype=precision.storage_dtype(torch), device=device)
    try:
        with precision.autocast(torch, device.type):
            out, _ = probe(x)
        out.float().sum().backward()
    except RuntimeError as exc:
        lines = str(exc).strip().splitlines()
        raise CaseSkipped(f"unsupported precision: {precision.dtype} LSTM on this "
                         f"{device.type.upper()}: {lines[0] if lines else type(exc).__name__}"
                         [:500]) from None


def check_finite(value: float, what: str) -> None:
    if not math.isfinite(value):
        raise CaseFailed(f"wrong result: {what} is {value}")


INSTALL_HINTS = {
    "transformers": "pip install transformers (or accelbench[models])",
    "torchvision": "install torchvision from the same package index as your torch build",
    "diffusers": "pip install 'accelbench[diffusion]'",
}


def built(torch: ModuleType, name: str, build: Callable[[], T]) -> T:
    """build(), with its failures turned into the case's outcome.

    Out of memory goes on to the runner, which records it as such; a missing library
    skips the case with how to install it; any other error fails the case.
    """
    try:
        return build()
    except torch.cuda.OutOfMemoryError:  # torch.OutOfMemoryError from torch 2.5 on
        raise
    except ImportError as exc:
        package = (exc.name or "").split(".")[0] or str(exc)
        hint = INSTALL_HINTS.get(package, f"install {package}")
        raise CaseSkipped(f"model {name} needs {package}, which is not installed: {hint}") \
            from None
    except Exception as exc:
        text = str(exc).strip().splitlines()
        raise CaseFailed(f"model {name} failed to build: {type(exc).__name__}: "
                         f"{text[0] if text else ''}"[:500]) from None


def agree_min(ctx: CaseContext, value: int) -> int:
    """The smallest value over all ranks (the coordinator gives the largest of floats)."""
    return int(-ctx.coordinator.slowest(-float(value)))


def setup_details(setup: ModelSetup, n_params: int) -> dict[str, Any]:
    spec = setup.spec
    details: dict[str, Any] = {
        "model": spec.name,
        "arch": spec.arch,
        "task": "sequence-classification" if spec.classifies_with(setup.head) else spec.task,
        "head": spec.head_label(setup.head),
        "parameters": n_params,
        "model_shape": dict(spec.shape),
        "precision": setup.precision.label,
        "batch": setup.batch,
    }
    if spec.uses_seq:
        details["seq"] = setup.seq
    if spec.is_vision:
        details["image"] = setup.image
    if spec.is_unet:
        details["latent"] = spec.shape["latent"]
    return details
