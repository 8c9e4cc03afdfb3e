"""The `gate` check: measure one figure of the node (catalog) and judge it against the
gates of this device's model (gates), shipped with accelbench or given in a site file.

One case per figure, each in its own supervised worker with a deadline: a hung GPU fails
its figure with "timed out", never the command. A case judges every subject it measured
(each GPU, each pair of GPUs, the node) against every gate of its figure that its level
reaches; a subject on the wrong side of a gate fails the case with the figure's reason
code (`ACCEL_GEMM_BELOW_GATE`), and the finding keeps the value, the threshold and where
the threshold comes from.

Which cases are planned follows from the gates (`applies`): a figure with no gate for
this device's model at the level asked is not run. A device whose model has no gates at
all gets one case, skipped with the reason, so the report says it was not judged rather
than guessing.

Timed figures on a GPU wait `settle` seconds first, so the heat and clocks one figure
leaves do not decide the next: the wait and the temperatures read before and after it
are in the details.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.health.findings import FAIL, PASS, Finding, conclude
from accelbench.benchmarks.health.findings import FORMAT as FINDINGS_FORMAT
from accelbench.benchmarks.qualify import catalog
from accelbench.core.measurement import CaseFailed, CaseResult, CaseSkipped, Figure
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark

if TYPE_CHECKING:
    from accelbench.benchmarks.qualify.figures import Reading
    from accelbench.benchmarks.qualify.gates import Gate, ModelGates
    from accelbench.core.context import CaseContext
    from accelbench.core.device import DeviceInfo

# The site's gates file, as `--gates` gave it: read by the planner and by every worker.
GATES_ENV = "ACCELBENCH_GATES"
LEVELS = (1, 2, 3, 4)
# A figure measured when the model has no gates: its case says why nothing is judged.
UNGATED_FIGURE = "memory-size"
NOT_JUDGED = "not judged:"
# Seconds of work per timed figure when `budget` is 0, by level: longer at higher levels
# (a longer GEMM at level 3), and the power figure's load as RVS's and DCGM's are.
_BUDGET = {1: 1.0, 2: 3.0, 3: 10.0, 4: 10.0}
_POWER_BUDGET = {1: 30.0, 2: 30.0, 3: 120.0, 4: 300.0}
_TRAIN_BUDGET = {1: 10.0, 2: 10.0, 3: 20.0, 4: 60.0}
_SETTLE_GPU_S = 10.0
# The code of a figure whose checked work came out wrong, by the figure's first word.
_WRONG_RESULT = {"gemm": "ACCEL_NUMERICS", "train": "ACCEL_NUMERICS",
                 "memory": "ACCEL_MEMTEST", "h2d": "ACCEL_COPY_MISMATCH",
                 "d2h": "ACCEL_COPY_MISMATCH", "dma": "ACCEL_COPY_MISMATCH",
                 "peer": "ACCEL_COPY_MISMATCH", "allreduce": "ACCEL_COLLECTIVE"}
_WRONG_OTHER = "ACCEL_CHECK_ERROR"


@dataclass(frozen=True)
class GateParams:
    """The parameters of a gate case (`BENCHMARK.params`)."""

    figure: str
    level: int
    budget: float
    settle: float


def budget_s(figure: str, level: int, budget: float) -> float:
    """The seconds of work a figure gets: `budget`, or the level's default for it."""
    if budget > 0:
        return budget
    if not catalog.kind(figure).timed:
        return 0.0
    table = {"power": _POWER_BUDGET, "train": _TRAIN_BUDGET}.get(figure, _BUDGET)
    return table[level]


def site_file() -> str | None:
    return os.environ.get(GATES_ENV) or None


def gates_of(device: DeviceInfo) -> tuple[ModelGates | None, str]:
    """The gates of `device`'s model (shipped and the site's), and what chose them: read
    once per site file as it is now, though the planner asks for every figure."""
    site = site_file()
    try:
        stamp = os.stat(site).st_mtime_ns if site else None
    except OSError:
        stamp = None  # reading it says what is wrong
    return _gates_of(device, site, stamp)


@functools.lru_cache(maxsize=16)
def _gates_of(device: DeviceInfo, site: str | None, stamp: int | None
              ) -> tuple[ModelGates | None, str]:
    from accelbench.benchmarks.qualify.gates import load_gates, select

    return select(device, load_gates(site))


def judged_gates(model: ModelGates, figure: str, level: int) -> tuple[Gate, ...]:
    """The gates of `figure` a case at `level` judges."""
    return tuple(g for g in model.gates if g.figure == figure and g.level <= level)


def applies(params: Mapping[str, Any], device: DeviceInfo) -> bool:
    """Whether a case of these parameters is planned on `device`: its figure has a gate
    at its level; with no gates for the model, one case, to say so."""
    model, _ = gates_of(device)
    if model is None:
        return params["figure"] == UNGATED_FIGURE
    return bool(judged_gates(model, str(params["figure"]), int(params["level"])))


def measure(ctx: CaseContext, params: GateParams) -> CaseResult:
    from accelbench.benchmarks.qualify import figures

    model, chosen = gates_of(ctx.device)
    if model is None:
        raise CaseSkipped(f"{NOT_JUDGED} {chosen}")
    gates = judged_gates(model, params.figure, params.level)
    if not gates:
        raise CaseSkipped(f"{model.model} has no {params.figure} gate at level "
                          f"{params.level}")
    settled = _settle(ctx, params)
    seconds = budget_s(params.figure, params.level, params.budget)
    # One reading per message size the gates name (all-reduce), else one.
    # A figure read from the system takes no time; the measurer is given a nominal second.
    try:
        readings = {size: figures.measure(ctx, params.figure, seconds=seconds or 1.0,
                                          size_mib=size)
                    for size in dict.fromkeys(g.size_mib for g in gates)}
    except CaseFailed as wrong:  # the work is checked before it is timed, and was wrong
        found = [Finding("node", FAIL, "a figure's work gives the known result before it is "
                         "timed", str(wrong), {"figure": params.figure},
                         code=_WRONG_RESULT.get(params.figure.split("-")[0], _WRONG_OTHER))]
        raise CaseFailed(str(wrong), details={"findings_format": FINDINGS_FORMAT,
                                              "findings": [f.to_dict() for f in found],
                                              "verdict": FAIL, "gates": chosen}) from None
    found = [f for gate in gates for f in judge(gate, readings[gate.size_mib])]
    details = {"gates": chosen, "model": model.model, "level": params.level,
               "budget_s": seconds, "settle": settled,
               "readings": [_reading_details(r) for r in readings.values()],
               "gates_judged": [g.to_dict() for g in gates]}
    kind = catalog.kind(params.figure)
    extra = tuple(Figure(subject if size is None else f"{subject} {size:g} MiB", value,
                         kind.unit, higher_is_better=kind.higher_is_better)
                  for size, r in readings.items() for subject, value in sorted(r.values.items()))
    return conclude(found, details, None if found else "no subject to judge", extra)


def judge(gate: Gate, reading: Reading) -> list[Finding]:
    """One finding per subject the gate covers: pass or fail with the figure's code."""
    kind = catalog.kind(gate.figure)
    threshold = gate.threshold_for(reading.cores)
    found = []
    for subject, value in sorted(reading.values.items()):
        link = reading.links.get(subject)
        if gate.link is not None and link != gate.link:
            continue
        ok = gate.passes(value, reading.cores)
        side = "≥" if gate.direction == "min" else "≤"
        what = f"{gate.figure}" + (f" over {link}" if link else "")
        verdict = "meets" if ok else ("below" if gate.direction == "min" else "above")
        message = (f"{what} {_num(value)} {kind.unit}: {verdict} the gate {side} "
                   f"{_num(threshold)} {kind.unit}")
        reading_of = {"value": value, "threshold": threshold, "unit": kind.unit,
                      "link": link, "samples": len(reading.samples.get(subject, ())),
                      "source": gate.source, "basis": gate.basis, "origin": gate.origin}
        found.append(Finding(subject, PASS if ok else FAIL, gate.describe(), message,
                             reading_of, code=None if ok else kind.code))
    return found


def _num(value: float) -> str:
    return f"{value:.4g}"


def _reading_details(reading: Reading) -> dict[str, Any]:
    return {"figure": reading.figure, "values": dict(reading.values),
            "samples": {k: list(v) for k, v in reading.samples.items()},
            "links": dict(reading.links), "cores": reading.cores, **dict(reading.details)}


def _settle(ctx: CaseContext, params: GateParams) -> dict[str, Any]:
    """Wait before a timed figure on a GPU, reading the temperatures before and after."""
    if not catalog.kind(params.figure).timed:
        return {"waited_s": 0.0, "why": "nothing is timed"}
    if ctx.device.device_class != "gpu":
        return {"waited_s": 0.0, "why": "on the CPU nothing settles"}
    wait = params.settle if params.settle >= 0 else _SETTLE_GPU_S
    before = _temperatures(ctx)
    time.sleep(wait)
    return {"waited_s": wait, "temperature_before_c": before,
            "temperature_after_c": _temperatures(ctx)}


def _temperatures(ctx: CaseContext) -> dict[str, float]:
    """Each GPU's temperature now, from NVML or amdsmi (empty where none answers)."""
    from accelbench.benchmarks.qualify.figures_base import gpu_indices
    from accelbench.core.telemetry import TEMP_C
    from accelbench.env.telemetry import open_sources, vendor_index

    out: dict[str, float] = {}
    for index in gpu_indices(ctx):
        try:
            sources, _ = open_sources("cuda", vendor_index(index),
                                      include=("nvml", "amdsmi", "amd-smi"))
        except Exception:  # a reading beside the check never fails it
            continue
        for source in sources:
            try:
                value = source.read().get(TEMP_C)
            except Exception:
                value = None
            finally:
                source.close()
            if value is not None:
                out[f"gpu{index}"] = float(value)
                break
    return out


def _extra_time(params: Mapping[str, Any]) -> float:
    work = budget_s(str(params["figure"]), int(params["level"]), float(params["budget"]))
    settle = float(params["settle"]) if float(params["settle"]) >= 0 else _SETTLE_GPU_S
    # Each figure may take twice its budget (setting up, every GPU in turn) and settles.
    return 2.0 * work * _subjects_factor(str(params["figure"])) + settle


def _subjects_factor(figure: str) -> float:
    """A figure measured per pair of GPUs takes as many budgets as there are pairs."""
    return 8.0 if catalog.kind(figure).per == "pair" else 1.0


BENCHMARK = Benchmark(
    name="gate",
    family="qualify",
    summary="measure one figure of the node (GEMM per precision, memory, host and peer "
    "links, all-reduce, launch, power, training) and judge it against the gates of this "
    "GPU model, with the figure's reason code",
    entry="accelbench.benchmarks.qualify.declaration:measure",
    sources=("accelbench.benchmarks.qualify.figures", "accelbench.benchmarks.qualify.catalog"),
    params=(Param("figure", "str", "gemm-bf16", choices=catalog.FIGURES,
                  help="the figure to measure and judge: " + ", ".join(catalog.FIGURES)),
            Param("level", "int", 2, choices=LEVELS,
                  help="the validate level: the gates up to it are judged"),
            Param("budget", "float", 0.0, minimum=0.0,
                  help="seconds of work for a timed figure (0: the level's default)"),
            Param("settle", "float", -1.0, quiet_default=True,
                  help="seconds a GPU rests before a timed figure (-1: "
                  f"{_SETTLE_GPU_S:g}; the CPU does not wait)")),
    devices=("cpu", "cuda"),
    timeout_s=120.0,
    extra_time=_extra_time,
    applies=applies,
    views=("accelbench.benchmarks.qualify.view:sections",),
    typed=GateParams,
)
