"""Inference engines: one way each of running a model's forward pass, behind one protocol.

An engine turns the eager fp32 model (a module taking the batch's tensors in order and
returning one tensor, see `wrap`) into a callable, and says what it did: the exporter, the
providers used, the optimisation level, the quantisation recipe. Every engine is checked
against eager fp32 on the same device before it is timed (`parity`).

| engine                 | module      | what runs                                          |
|------------------------|-------------|----------------------------------------------------|
| `eager`                | eager       | the module itself (autocast for fp16/bf16)         |
| `compile`              | compiled    | torch.compile, inductor's default mode             |
| `compile-max-autotune` | compiled    | torch.compile(mode="max-autotune"): tuned kernels  |
| `torchscript`          | torchscript | torch.jit.trace, freeze, optimize_for_inference    |
| `onnxruntime`          | onnxrt      | torch.onnx export, an ONNX Runtime session         |
| `int8`                 | int8        | quantised: dynamic, PT2E, ONNX Runtime, torchao    |

This module holds the names and the protocol only (no torch): declarations import it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from torch import Tensor, nn

    from accelbench.benchmarks.models.precision import Precision

EAGER, COMPILE, MAX_AUTOTUNE = "eager", "compile", "compile-max-autotune"
TORCHSCRIPT, ONNXRUNTIME, INT8 = "torchscript", "onnxruntime", "int8"
ENGINE_NAMES = (EAGER, COMPILE, MAX_AUTOTUNE, TORCHSCRIPT, ONNXRUNTIME, INT8)

# Where each engine lives: "module:attribute", imported in the worker only.
_ENTRIES: Mapping[str, str] = MappingProxyType({
    EAGER: "eager:ENGINE",
    COMPILE: "compiled:COMPILE_ENGINE",
    MAX_AUTOTUNE: "compiled:MAX_AUTOTUNE_ENGINE",
    TORCHSCRIPT: "torchscript:ENGINE",
    ONNXRUNTIME: "onnxrt:ENGINE",
    INT8: "int8:ENGINE",
})
ENGINE_SOURCES = tuple(f"{__name__}.{name}" for name in (
    "eager", "compiled", "torchscript", "onnxrt", "int8", "parity", "wrap", "packages"))

# ONNX Runtime graph optimisation levels ("" is all of them).
ORT_LEVELS = ("", "disable", "basic", "extended", "all")
# Quantisation recipes of the int8 engine ("": the device's usual one, see int8).
INT8_METHODS = ("", "dynamic", "pt2e", "ort-dynamic", "ort-static", "torchao")
ORT_INT8_METHODS = ("ort-dynamic", "ort-static")  # recipes that run on ONNX Runtime


@dataclass(frozen=True)
class Options:
    """The engine settings of a case (each applies to some engines only)."""

    provider: str = ""  # ONNX Runtime execution provider ("": the platform's)
    ort_level: str = ""  # ONNX Runtime graph optimisation level
    int8: str = ""  # quantisation recipe


@dataclass(frozen=True)
class Job:
    """What an engine is given: the eager model and a batch of the case's inputs."""

    torch: ModuleType
    module: nn.Module  # fp32, eval mode, on the device: forward(*tensors) -> Tensor
    example: tuple[Tensor, ...]  # the inputs, in the order the module takes them
    input_names: tuple[str, ...]
    device: Any  # torch.device
    precision: Precision
    options: Options
    workdir: Path  # for exported files; removed after the case


@dataclass(frozen=True)
class Prepared:
    """A ready engine: `run(inputs)` returns the output; nothing in it synchronises.

    `lazy` says that the first call still compiles (torch.compile), so the compile time
    is the first call less a steady one, on top of `prepare_s`."""

    run: Callable[[tuple[Tensor, ...]], Any]
    details: dict[str, Any] = field(default_factory=dict)
    lazy: bool = False
    # The output as a torch tensor on the device, from what `run` returned, for an engine
    # whose `run` returns something else (a tuple, a model output object).
    output: Callable[[Any], Tensor] | None = None
    cleanup: Callable[[], None] | None = None


class Engine(Protocol):
    name: str

    def problem(self, job: Job) -> str | None:
        """Why this engine cannot run this job here (the case is skipped), or None."""

    def prepare(self, job: Job) -> Prepared:
        """The ready engine. Raise CaseSkipped for a missing package, CaseFailed (with
        the reason) for an export or conversion that fails."""


def get(name: str) -> Engine:
    """The engine of that name (imports its module: worker side only)."""
    if name not in _ENTRIES:
        raise ValueError(f"unknown engine {name!r} (engines: {', '.join(ENGINE_NAMES)})")
    module, _, attr = _ENTRIES[name].partition(":")
    engine: Engine = getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    return engine


def describe_options(name: str, options: Options) -> dict[str, Any]:
    """The settings that apply to engine `name`, for the case's details."""
    if name == ONNXRUNTIME:
        return {"provider": options.provider or "auto", "ort_level": options.ort_level or "all"}
    if name == INT8:
        return {"int8": options.int8 or "auto"}
    return {}


def unused_options(name: str, options: Options) -> str | None:
    """An engine setting given to an engine it does not apply to, in words, or None."""
    if options.provider and name != ONNXRUNTIME and not (
            name == INT8 and options.int8 in ORT_INT8_METHODS):
        return f"provider applies to onnxruntime (and int8 with an ort recipe), not {name}"
    if options.ort_level and name != ONNXRUNTIME:
        return f"ort_level applies to onnxruntime, not {name}"
    if options.int8 and name != INT8:
        return f"int8 applies to the int8 engine, not {name}"
    return None
