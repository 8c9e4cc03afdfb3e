"""From a request (suite, benchmarks, overrides) to the list of cases to run.

Everything that can be checked without a device is checked in `validate`, before any
process starts: it parses the request once, into typed values (each -p text split and
converted by its parameter, the device named), which is what the sessions take. `expand`
then turns the suite's grids and those values into concrete cases for the device that
the worker found; nothing is parsed again.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from accelbench.core.case import Case, label_value
from accelbench.core.device import DeviceInfo, parse_device_spec
from accelbench.core.dtypes import DTYPES
from accelbench.core.names import BACKENDS
from accelbench.core.params import OMIT, UNKEYED
from accelbench.core.registry import Benchmark, Registry, core_suite_files
from accelbench.core.request import RunRequest
from accelbench.core.timing import TimingPolicy
from accelbench.errors import UserError

if TYPE_CHECKING:
    from importlib.abc import Traversable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEVICE_CLASSES = ("any", "cpu", "gpu", "cuda", "rocm", "xpu", "mps")


@dataclass(frozen=True)
class SuiteEntry:
    bench: str
    devices: tuple[str, ...]
    grid: Mapping[str, tuple[Any, ...]]
    # Ranks for a distributed benchmark when the user asks for none: a number, or
    # "devices" for one rank per visible GPU; a list of those runs the entry's cases at
    # each (a scaling series: 1, 2, 4 ... ranks).
    ranks: int | str | tuple[int | str, ...] | None = None

    def applies_to(self, device: DeviceInfo) -> bool:
        return bool({"any", device.device_class, device.platform} & set(self.devices))


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    timing: Mapping[str, Any]
    entries: tuple[SuiteEntry, ...]
    # Runs `accelbench run --suite NAME` makes in a row when not given --repeat (the
    # suite's top-level `repeat`; inherited through `extends`).
    repeat: int = 1

    def benchmarks(self) -> list[str]:
        return list(dict.fromkeys(e.bench for e in self.entries))


def suite_names(registry: Registry | None = None) -> list[str]:
    """Every suite's name: accelbench's own and each of `registry`'s families', found
    from their files."""
    return list(_suite_files(registry))


def _suite_files(registry: Registry | None) -> dict[str, Traversable]:
    """The suites of `registry`'s families and accelbench's own (None: its own only)."""
    return core_suite_files() if registry is None else registry.suite_files()


def load_suite(name: str, registry: Registry | None = None) -> Suite:
    """The suite `name`, of accelbench's own files or one of `registry`'s families'."""
    files = _suite_files(registry)
    if name not in files:
        raise UserError(f"unknown suite {name!r} (suites: {', '.join(files)})")
    return parse_suite(name, tomllib.loads(files[name].read_text(encoding="utf-8")), registry)


def parse_suite(name: str, data: Mapping[str, Any], registry: Registry | None = None
                ) -> Suite:
    """The suite `name` of its TOML file's `data` (a suite it extends is loaded by name)."""
    entries: list[SuiteEntry] = []
    timing: dict[str, Any] = {}
    repeat = 1
    if "extends" in data:
        base = load_suite(data["extends"], registry)
        entries.extend(base.entries)
        timing.update(base.timing)
        repeat = base.repeat
    timing.update(data.get("timing", {}))
    repeat = data.get("repeat", repeat)
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"suite {name}: repeat must be a positive number")
    for raw in data.get("cases", ()):
        devices = tuple(raw.get("devices", ["any"]))
        bad = set(devices) - set(DEVICE_CLASSES)
        if bad:
            raise ValueError(f"suite {name}: unknown device class {sorted(bad)}")
        grid = {k: tuple(v if isinstance(v, list) else [v]) for k, v in raw.get("grid", {}).items()}
        ranks = raw.get("ranks")
        if isinstance(ranks, list):
            ranks = tuple(ranks)
        if not all(_rank_count(r) for r in (ranks if isinstance(ranks, tuple) and ranks
                                            else (ranks,))):
            raise ValueError(f"suite {name}: ranks must be a positive number, 'devices', or "
                             f"a list of those")
        entries.append(SuiteEntry(raw["bench"], devices, grid, ranks))
    return Suite(name, data.get("description", ""), timing, tuple(entries), repeat)


def _rank_count(value: object) -> bool:
    return value is None or value == "devices" or (
        isinstance(value, int) and not isinstance(value, bool) and value >= 1)


@dataclass(frozen=True)
class ValidRequest:
    """A request that `validate` has checked, with what checking it worked out; the
    sessions take only this, so a request is validated and parsed once, before anything
    starts."""

    request: RunRequest
    registry: Registry
    suite: Suite
    policy: TimingPolicy
    # Per benchmark, per parameter given: its values, parsed (sweeps spread out).
    given: Mapping[str, Mapping[str, tuple[Any, ...]]]
    # --device as (kind, index): "auto", "cpu", "cuda", ...; index None when not named.
    device: tuple[str, int | None]


def validate(request: RunRequest, registry: Registry, suite: Suite | None = None
             ) -> ValidRequest:
    """Check names and values before anything runs, parsing each once; raise UserError
    on the first problem. `suite` replaces the request's named one (a command's own
    grid, or none)."""
    suite = suite or load_suite(request.suite, registry)
    selected = [registry.get(name) for name in request.benches] or [
        registry.get(name) for name in suite.benchmarks()
    ]
    for dtype in request.dtypes:
        if dtype not in DTYPES:
            raise UserError(f"unknown dtype {dtype!r} (dtypes: {', '.join(DTYPES)})")
        if not any(dtype in b.dtypes for b in selected):
            names = ", ".join(b.name for b in selected)
            raise UserError(f"dtype {dtype} is not measured by the selected benchmarks ({names})")
    given: dict[str, dict[str, tuple[Any, ...]]] = {b.name: {} for b in selected}
    for name in dict.fromkeys((*request.overrides, *request.values)):
        owners = [b for b in selected if b.param(name) is not None]
        if not owners:
            names = ", ".join(b.name for b in selected)
            raise UserError(f"no selected benchmark has a parameter {name!r} ({names})")
        for bench in owners:
            declared = bench.param(name)
            assert declared is not None
            values = given_values(bench, name, request.overrides.get(name, ()),
                                  request.values.get(name, ()))
            given[bench.name][name] = tuple(declared.parse(v, bench.name) for v in values)
    if request.nproc_per_node is not None and request.nproc_per_node < 1:
        raise UserError("--nproc-per-node must be at least 1")
    if request.threads is not None and request.threads < 1:
        raise UserError("--threads must be at least 1")
    if request.wait_quiet is not None and not 0 < request.wait_quiet < float("inf"):
        raise UserError("--wait-quiet must be a positive number of seconds")
    if request.backend is not None and request.backend not in BACKENDS:
        raise UserError(f"unknown backend {request.backend!r} (backends: {', '.join(BACKENDS)})")
    return ValidRequest(request, registry, suite, timing_policy(suite, request), given,
                        parse_device_spec(request.device))


def timing_policy(suite: Suite, request: RunRequest) -> TimingPolicy:
    settings = {**suite.timing, **request.timing}
    known = {f.name for f in fields(TimingPolicy)}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise UserError(f"unknown timing setting {unknown[0]!r}")
    # A NaN passes the policy's `<= 0` checks, and a NaN budget never runs out.
    for name, value in settings.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError(f"timing setting {name} must be a finite number, got {value!r}")
    try:
        return TimingPolicy(**settings)
    except (TypeError, ValueError) as exc:
        raise UserError(f"invalid timing settings: {exc}") from None


@dataclass(frozen=True)
class PlannedCase:
    benchmark: Benchmark
    case: Case
    params: Mapping[str, Any]
    ranks: int = 1  # processes a distributed case runs on

    def with_threads(self, threads: int) -> PlannedCase:
        """The same case on `threads` CPU threads per process: part of its identity, since
        a figure on one thread is not comparable with one on two."""
        identity = {**dict(self.case.params), "threads": threads}
        case = Case.make(self.case.benchmark, self.case.version, self.case.family, identity,
                         self.case.device, (*self.case.shown, "threads"), self.case.check)
        return PlannedCase(self.benchmark, case, self.params, self.ranks)

    def on_world(self, world_size: int, backend: str) -> PlannedCase:
        """The same case for a job of `world_size` ranks: part of what is compared."""
        identity = {**dict(self.case.params), "world_size": world_size, "backend": backend}
        case = Case.make(self.case.benchmark, self.case.version, self.case.family, identity,
                         self.case.device, (*self.case.shown, "world_size", "backend"),
                         self.case.check)
        return PlannedCase(self.benchmark, case, self.params, world_size)


def given_values(bench: Benchmark, name: str, texts: tuple[str, ...],
                 values: tuple[Any, ...] = ()) -> tuple[Any, ...]:
    """The values of a parameter given: each -p text split as the parameter says (commas
    make a grid, unless its one value holds commas), then the typed `values`, then
    sweeps spread out."""
    declared = bench.param(name)
    assert declared is not None
    split = (v for text in texts for v in declared.split(str(text)))
    return spread_values(bench, name, tuple(dict.fromkeys((*split, *values))))


def spread_values(bench: Benchmark, name: str, values: tuple[Any, ...]) -> tuple[Any, ...]:
    """A parameter's values with sweeps spread out: a parameter that has an `expand`
    method turns one value (e.g. the size sweep `8:1G:x2`) into several."""
    expand_value = getattr(bench.param(name), "expand", None)
    if expand_value is None:
        return tuple(values)
    return tuple(dict.fromkeys(v for value in values for v in expand_value(value)))


def expand(valid: ValidRequest, device: DeviceInfo, device_count: int = 1
           ) -> list[PlannedCase]:
    """The concrete, de-duplicated cases for this device, in suite order. A benchmark of
    the suite whose entries are all for other devices has no case here, unless it was
    asked for by name (`--bench`), when it runs with its defaults."""
    request, suite = valid.request, valid.suite
    names = list(request.benches) or suite.benchmarks()
    planned: dict[tuple[Case, int], PlannedCase] = {}
    for name in names:
        bench = valid.registry.get(name)
        # Cases the benchmark says do not apply on this device: left out, unless that
        # leaves it none, when they run to say why (a skip with its reason).
        aside: dict[tuple[Case, int], PlannedCase] = {}
        kept = len(planned)
        entries = [e for e in suite.entries if e.bench == name and e.applies_to(device)]
        if not entries and not request.benches:
            continue  # the suite measures it on other devices only
        for entry in entries or [SuiteEntry(name, ("any",), {})]:
            axes = {k: spread_values(bench, k, v) for k, v in entry.grid.items()}
            axes.update(valid.given.get(name, {}))
            if request.dtypes and bench.param("dtype") is not None:
                axes["dtype"] = tuple(d for d in request.dtypes if d in bench.dtypes)
            keys = list(axes)
            # A scaling series runs every case at its fewest ranks first: one job each.
            counts = _ranks(valid, entry, device, device_count)
            counts = counts if bench.distributed else counts[:1]
            for ranks in counts:
                for combo in itertools.product(*(axes[k] for k in keys)):
                    params = bench.resolve(dict(zip(keys, combo, strict=True)))
                    case = bench.case(params, device.torch_device)
                    into = (planned if bench.applies is None or bench.applies(params, device)
                            else aside)
                    into.setdefault((case, ranks), PlannedCase(bench, case, params, ranks))
        if len(planned) == kept:
            planned.update(aside)
    return by_worker(list(planned.values()), device)


def given_aside(valid: ValidRequest, cases: Sequence[PlannedCase]) -> list[str]:
    """The parameters given that apply to some of their benchmark's planned cases only
    (`Param.only_when`: `int8=dynamic` crossed with `engine=eager,int8`), one note each
    saying what the others keep; UserError for one that applies to none of them (`-p
    fast_accum=no` with `--dtype fp32`), which would otherwise be dropped unsaid."""
    notes = []
    for name, params in valid.given.items():
        mine = [c for c in cases if c.benchmark.name == name]
        if not mine:
            continue
        bench = mine[0].benchmark
        for param_name, values in params.items():
            declared = bench.param(param_name)
            if declared is None or not declared.conditions or set(values) == {declared.default}:
                continue
            shown = ",".join(label_value(v) for v in values)
            applied = sum(declared.applies(c.params) for c in mine)
            where = f"{name}: {param_name}={shown} applies only where {declared.condition_text()}"
            if not applied:
                raise UserError(f"{where}, and no {name} case here has it")
            if applied < len(mine):
                kept = ("leave it out" if declared.outside in (OMIT, UNKEYED)
                        else f"keep its default ({label_value(declared.default) or 'none'})")
                notes.append(f"{where}: the other {len(mine) - applied} of {len(mine)} "
                             f"{name} cases {kept}")
    return notes


def by_worker(cases: list[PlannedCase], device: DeviceInfo) -> list[PlannedCase]:
    """The cases with those of one benchmark that share a worker process next to each
    other, benchmarks and cases otherwise in plan order: a worker key or environment
    alternating within a grid (conv's `search` is its innermost axis) would start a
    fresh worker, with torch and the GPU libraries to load, for every case."""
    first_of: dict[object, int] = {}
    for case in cases:
        first_of.setdefault(case.benchmark.name, len(first_of))
        identity = (case.benchmark.name, case.benchmark.worker_identity(case.params, device))
        first_of.setdefault(identity, len(first_of))

    def order(case: PlannedCase) -> tuple[int, int]:
        identity = (case.benchmark.name, case.benchmark.worker_identity(case.params, device))
        return first_of[case.benchmark.name], first_of[identity]

    return sorted(cases, key=order)


def _ranks(valid: ValidRequest, entry: SuiteEntry, device: DeviceInfo, device_count: int
           ) -> tuple[int, ...]:
    """The rank counts an entry's cases run at, fewest first, each once."""
    if valid.request.nproc_per_node is not None:
        return (valid.request.nproc_per_node,)
    wanted = entry.ranks if isinstance(entry.ranks, tuple) and entry.ranks else (entry.ranks,)
    return tuple(sorted({_count(valid, r, device, device_count) for r in wanted}))


def _count(valid: ValidRequest, ranks: object, device: DeviceInfo,
           device_count: int) -> int:
    if ranks == "devices":
        # A device named with its index (--device cuda:1) is one device.
        _, index = valid.device
        return max(1, device_count) if device.type != "cpu" and index is None else 1
    return ranks if isinstance(ranks, int) else 1

