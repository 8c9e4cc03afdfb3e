"""Two sides' profiles of one case, aligned: which operators, shapes and kernels moved.

A side is profiled one or more times (`Rounds`, one trace each). Each trace gives a
`StepTable`: within its profiled steps, every CPU operator's self time (its duration less
its children's, as `profile.operators` counts it), keyed by name and by name with its
input shapes and element types, and every device activity's time by name; all divided
by the steps, so traces with different step counts compare. A side's figure for a key is
the median over its traces, and a change is `consistent` only when every trace of one side
lies beyond every trace of the other, in time and in its share of the step: two noisy
profiles differ by some percent in every operator, a mover that swaps places between
traces is not one, and a host that ran one side's processes slower (another job, a lower
clock) moves every operator's time but not their shares. Where nothing changed,
the traces of the two sides are exchangeable and such a separation happens by chance with
probability 2 / C(n_a + n_b, n_a) (`separation_chance`): 1 in 3 with two traces a side,
1 in 10 with three, 1 in 35 with four; so it says the change is beyond the profiles'
spread, not that it is significant on its own.

Pure functions of the traces' events: no torch, no files.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelbench.profile.categories import device_category
from accelbench.profile.operators import US, self_times
from accelbench.profile.trace import Trace

TOP = 10
# CPU operators that are a GEMM (or call one as their own work) in PyTorch's CPU and GPU
# dispatch; their shapes are what a GEMM library was asked.
GEMM_OPERATORS = frozenset({
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::matmul",
    "aten::linear", "aten::_int_mm", "aten::_scaled_mm", "aten::_addmm_activation",
    "aten::mkldnn_linear", "aten::_mkldnn_linear", "aten::addmv", "aten::mv", "aten::dot",
})
# Device kernels of GEMM libraries, by the names they launch: Tensile and hipBLASLt
# ("Cijk_..."), rocBLAS, cuBLAS/cuBLASLt (sm90_xmma_gemm_..., nvjet_..., ampere_..._gemm),
# CUTLASS and CK.
_GEMM_KERNEL = re.compile(r"(^Cijk_|gemm|Gemm|GEMM|nvjet|cutlass|xmma|_mma_|wmma)")
# The longest name or shape text kept of an operator: a hostile trace cannot bloat a record.
_NAME_MAX = 300


@dataclass(frozen=True)
class StepTable:
    """One trace, per profiled step: seconds per key, and calls per key."""

    steps: int
    step_s: float  # the median profiled step
    operators: Mapping[str, float]  # name -> self seconds per step
    operator_calls: Mapping[str, float]
    shapes: Mapping[tuple[str, str, str], float]  # (name, shapes, types) -> self s per step
    kernels: Mapping[str, float]  # device activity name -> seconds per step
    kernel_categories: Mapping[str, str] = field(default_factory=dict)
    basis: str = "cpu"  # "device" when the trace has device activity in its steps


def step_table(trace: Trace) -> StepTable:
    """The per-step table of one trace's profiled steps (the whole trace without steps)."""
    start, end = _window(trace)
    steps = max(1, len(trace.steps))
    inside = [e for e in trace.cpu_ops if start <= e.ts < end]
    operators: dict[str, float] = defaultdict(float)
    calls: dict[str, float] = defaultdict(float)
    shapes: dict[tuple[str, str, str], float] = defaultdict(float)
    for item in self_times(inside):
        name = _clip(item.event.name)
        seconds = item.self_us * US / steps
        operators[name] += seconds
        calls[name] += 1 / steps
        shapes[(name, _clip(_dims(item.event.args)), _clip(_types(item.event.args)))] += seconds
    kernels: dict[str, float] = defaultdict(float)
    categories: dict[str, str] = {}
    device = [e for e in trace.device if e.end > start and e.ts < end]
    for event in device:
        name = _clip(event.name)
        kernels[name] += event.dur * US / steps
        categories[name] = device_category(event.cat, event.name)
    durations = [s.dur * US for s in trace.steps]
    step_s = statistics.median(durations) if durations else (end - start) * US
    return StepTable(steps, step_s, dict(operators), dict(calls), dict(shapes), dict(kernels),
                     categories, "device" if device else "cpu")


def _window(trace: Trace) -> tuple[float, float]:
    if trace.steps:
        start = trace.steps[0].ts
        end = max(s.end for s in trace.steps)
        return start, max([end, *(e.end for e in trace.device if start <= e.ts < end)])
    events = [*trace.cpu_ops, *trace.device]
    if not events:
        return 0.0, 0.0
    return min(e.ts for e in events), max(e.end for e in events)


def _dims(args: Mapping[str, Any]) -> str:
    """The shapes of the operator's tensor inputs, "64x3x7x7, 64"; scalars left out."""
    shapes = _tensor_inputs(args, "Input Dims")
    return ", ".join("x".join(str(d) for d in shape) for shape in shapes)


def _types(args: Mapping[str, Any]) -> str:
    """The element types of the operator's tensor inputs, as the profiler names them."""
    return ", ".join(str(t) for t in _tensor_inputs(args, "Input type"))


def _tensor_inputs(args: Mapping[str, Any], field_name: str) -> list[Any]:
    """`field_name`'s entries for the inputs that are tensors (those with dimensions)."""
    dims, values = args.get("Input Dims"), args.get(field_name)
    if not isinstance(dims, list) or not isinstance(values, list):
        return []
    return [value for shape, value in zip(dims[:16], values[:16], strict=False)
            if isinstance(shape, list) and shape and value not in ("", None)][:8]


def _clip(text: str) -> str:
    return text if len(text) <= _NAME_MAX else text[:_NAME_MAX - 1] + "…"


def separation_chance(n_a: int, n_b: int) -> float:
    """The chance that every one of `n_b` exchangeable values lies beyond every one of
    `n_a` others, either way: how often `Moved.consistent` holds where nothing moved."""
    if n_a < 1 or n_b < 1:
        return 1.0
    return min(1.0, 2 / math.comb(n_a + n_b, n_a))


def separated(a: Sequence[float], b: Sequence[float]) -> int:
    """+1 where every value of `b` lies above every value of `a`, -1 where below, else 0."""
    if not a or not b:
        return 0
    if min(b) > max(a):
        return 1
    if max(b) < min(a):
        return -1
    return 0


@dataclass(frozen=True)
class Moved:
    """One key's time per step on each side (the median over its profiles, and each),
    with each profile's step time where the key is a part of the step."""

    key: str
    a_s: float
    b_s: float
    a_each: tuple[float, ...]
    b_each: tuple[float, ...]
    detail: Mapping[str, Any] = field(default_factory=dict)
    a_steps: tuple[float, ...] = ()
    b_steps: tuple[float, ...] = ()

    @property
    def delta_s(self) -> float:
        return self.b_s - self.a_s

    @property
    def ratio(self) -> float | None:
        return self.b_s / self.a_s if self.a_s > 0 else None

    @property
    def shares(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Each profile's share of its step spent here, A's and B's."""
        def share(each: Sequence[float], steps: Sequence[float]) -> tuple[float, ...]:
            return tuple(v / s if s > 0 else 0.0 for v, s in zip(each, steps, strict=False))

        return share(self.a_each, self.a_steps), share(self.b_each, self.b_steps)

    @property
    def consistent(self) -> bool:
        """Every profile of one side beyond every profile of the other, in time and, for
        a part of the step, in its share of the step the same way: a host that ran one
        side's profiles slower moves every operator's time, not their shares."""
        way = separated(self.a_each, self.b_each)
        if way == 0:
            return False
        if not self.a_steps or not self.b_steps:
            return True
        return separated(*self.shares) == way

    @property
    def only_in(self) -> str | None:
        if self.a_s == 0 and self.b_s > 0:
            return "b"
        if self.b_s == 0 and self.a_s > 0:
            return "a"
        return None

    def to_dict(self, step_delta_s: float) -> dict[str, Any]:
        out = {"name": self.key, **self.detail,
               "a_s_per_step": self.a_s, "b_s_per_step": self.b_s,
               "delta_s_per_step": self.delta_s, "ratio": self.ratio,
               "share_of_change": (self.delta_s / step_delta_s
                                   if step_delta_s and math.isfinite(step_delta_s) else None),
               "consistent": self.consistent, "only_in": self.only_in}
        if self.a_steps and self.b_steps:
            share_a, share_b = self.shares
            out["share_of_step"] = {"a": _median(share_a), "b": _median(share_b)}
        return out


@dataclass(frozen=True)
class Diff:
    """Two sides' tables aligned: step time and the movers by kind."""

    a: tuple[StepTable, ...]
    b: tuple[StepTable, ...]
    step: Moved
    operators: tuple[Moved, ...]  # every operator, largest move in the step's direction first
    shapes: tuple[Moved, ...]
    kernels: tuple[Moved, ...]

    @property
    def basis(self) -> str:
        return "device" if any(t.basis == "device" for t in (*self.a, *self.b)) else "cpu"

    def largest(self) -> Moved | None:
        """The operator that moved most in the step's direction; None when none did."""
        for moved in self.operators:
            if moved.delta_s * self.step.delta_s > 0:
                return moved
        return None

    def to_dict(self, top: int = TOP) -> dict[str, Any]:
        step = self.step.delta_s
        return {
            "basis": self.basis,
            "steps": {"a": [t.steps for t in self.a], "b": [t.steps for t in self.b]},
            "step": {"a_s": self.step.a_s, "b_s": self.step.b_s,
                     "delta_s": step, "ratio": self.step.ratio,
                     "a_each": list(self.step.a_each), "b_each": list(self.step.b_each),
                     "consistent": self.step.consistent},
            "separation_chance": separation_chance(len(self.a), len(self.b)),
            "operators_total": len(self.operators),
            "operators_consistent": sum(m.consistent for m in self.operators),
            "operators": [m.to_dict(step) for m in self.operators[:top]],
            "shapes": [m.to_dict(step) for m in self.shapes[:top]],
            "kernels": [m.to_dict(step) for m in self.kernels[:top]],
            "gemm": {"a": gemm_summary(self.a), "b": gemm_summary(self.b)},
        }


def diff(a: Sequence[StepTable], b: Sequence[StepTable]) -> Diff:
    """Align the two sides' tables (one per profile of each side)."""
    if not a or not b:
        raise ValueError("each side needs at least one profile")
    step = Moved("step", _median([t.step_s for t in a]), _median([t.step_s for t in b]),
                 tuple(t.step_s for t in a), tuple(t.step_s for t in b))
    direction = 1.0 if step.delta_s >= 0 else -1.0

    def moved(tables_a: Sequence[Mapping[Any, float]], tables_b: Sequence[Mapping[Any, float]],
              describe: Any) -> tuple[Moved, ...]:
        keys = set().union(*tables_a, *tables_b)
        rows = []
        for key in keys:
            each_a = tuple(t.get(key, 0.0) for t in tables_a)
            each_b = tuple(t.get(key, 0.0) for t in tables_b)
            name, detail = describe(key)
            rows.append(Moved(name, _median(each_a), _median(each_b), each_a, each_b, detail,
                              step.a_each, step.b_each))
        rows.sort(key=lambda m: (-direction * m.delta_s, -max(m.a_s, m.b_s), m.key))
        return tuple(rows)

    operators = moved([t.operators for t in a], [t.operators for t in b],
                      lambda key: (key, {"calls_per_step": _calls(key, a, b)}))
    shapes = moved([t.shapes for t in a], [t.shapes for t in b],
                   lambda key: (key[0], {"shapes": key[1], "types": key[2]}))
    categories = {k: v for t in (*a, *b) for k, v in t.kernel_categories.items()}
    kernels = moved([t.kernels for t in a], [t.kernels for t in b],
                    lambda key: (key, {"category": categories.get(key, ""),
                                       "gemm": bool(_GEMM_KERNEL.search(key))}))
    return Diff(tuple(a), tuple(b), step, operators, shapes, kernels)


def _calls(key: str, a: Sequence[StepTable], b: Sequence[StepTable]) -> dict[str, float]:
    return {"a": _median([t.operator_calls.get(key, 0.0) for t in a]),
            "b": _median([t.operator_calls.get(key, 0.0) for t in b])}


def _median(values: Iterable[float]) -> float:
    found = list(values)
    return statistics.median(found) if found else 0.0


def gemm_summary(tables: Sequence[StepTable], top: int = 5) -> dict[str, Any]:
    """What a side's GEMMs were: the GEMM operators with their shapes and types, and the
    device kernels of GEMM libraries it launched (their names say which library and
    which solution), by time per step."""
    shapes: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    kernels: dict[str, list[float]] = defaultdict(list)
    for table in tables:
        for key, seconds in table.shapes.items():
            if key[0] in GEMM_OPERATORS:
                shapes[key].append(seconds)
        for name, seconds in table.kernels.items():
            if _GEMM_KERNEL.search(name):
                kernels[name].append(seconds)
    ranked_shapes = sorted(shapes.items(), key=lambda kv: (-_median(kv[1]), kv[0]))
    ranked_kernels = sorted(kernels.items(), key=lambda kv: (-_median(kv[1]), kv[0]))
    return {
        "operators": [{"name": k[0], "shapes": k[1], "types": k[2], "s_per_step": _median(v)}
                      for k, v in ranked_shapes[:top]],
        "kernels": [{"name": k, "s_per_step": _median(v)} for k, v in ranked_kernels[:top]],
    }
