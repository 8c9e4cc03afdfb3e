"""A benchmark's declaration: its name, family, parameters, devices and the entry point
that measures one case.

Declarations are cheap to import: the entry point is a "module:function" string
resolved only inside the worker process, so listing or validating benchmarks never
imports torch.
"""


from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, TypeAlias

from accelbench.core.case import Case
from accelbench.core.params import Param, check_typed, resolve_params, typed_params
from accelbench.core.worker_env import NONE, WorkerEnv

if TYPE_CHECKING:

    from accelbench.core.context import CaseContext
    from accelbench.core.device import DeviceInfo
    from accelbench.core.measurement import CaseResult, Measurement
    from accelbench.core.view import Section

# What a benchmark's entry point is: it measures one case from its resolved parameters.
MeasureFn: TypeAlias = "Callable[[CaseContext, Any], CaseResult]"
# What a view is: the sections a family's results add to a run's report.
ViewFn: TypeAlias = "Callable[[Sequence[Measurement]], Sequence[Section]]"

_FAMILY = re.compile(r"[a-z][a-z0-9_-]{0,31}")
DEVICE_TYPES = ("cpu", "cuda", "xpu", "mps")  # ROCm devices are "cuda" in PyTorch
_OFF = (False, 0, "")  # parameter values that mean "this switch is off"


@dataclass(frozen=True)
class Benchmark:
    name: str
    family: str
    summary: str
    entry: str  # "package.module:function", called as function(ctx, params) -> CaseResult
    params: tuple[Param, ...] = ()
    devices: tuple[str, ...] = ("cpu", "cuda")
    timeout_s: float = 300.0  # per case, enforced by the supervising runner
    # Runs on every rank of a torch.distributed job at once (collectives, data-parallel
    # training); the runner launches the ranks and stores rank 0's result.
    distributed: bool = False
    min_ranks: int = 1  # a distributed benchmark with fewer ranks is skipped, unlaunched
    # Other modules whose code decides the numbers (shapes, model definitions): part of
    # the version along with the entry module.
    sources: tuple[str, ...] = ()
    # Cases with different keys never share a worker process: for state a case leaves
    # in the process that would change what a later case measures (PyTorch keeps the
    # convolution algorithm it picked for a problem for the life of the process).
    worker_key: Callable[[Mapping[str, Any]], str] | None = None
    # What a case's worker process must start with, from the case's parameters and the
    # device (see core.worker_env): switches that libraries read once, when they load.
    worker_env: Callable[[Mapping[str, Any], DeviceInfo], WorkerEnv] | None = None
    # Seconds a case may take beyond `timeout_s`, from its parameters: for a case whose
    # length is a parameter (a burn-in of N seconds).
    extra_time: Callable[[Mapping[str, Any]], float] | None = None
    # Whether a case of these parameters is planned on this device at all (a qualify
    # gate whose figure has no gate for the device's model): None plans every case.
    applies: Callable[[Mapping[str, Any], DeviceInfo], bool] | None = None
    # What this benchmark's results add to a run's report: "module:function" entries,
    # each called with the run's measurements of every benchmark naming that entry and
    # returning core.view Sections (see `Registry.views`). Resolved only when a report
    # is made, so declaring a view imports nothing.
    views: tuple[str, ...] = ()
    # The frozen dataclass the measure function is given the case's parameters as (one
    # field per `Param`, checked here); None: a plain dict.
    typed: type | None = None
    # Its cases are checks: set by the registry from its family (core.family.Family).
    check: bool = False
    # Its cases are timed sample by sample through the harness's timing loop, so that the
    # two processes of an `accelbench ab` pair can measure one at once, taking turns
    # between samples on the same CPUs (runner.turns). False for a benchmark that runs a
    # protocol of its own (a load generator, a server, processes or threads of its own):
    # a pair measures its cases one after the other, each process using the CPUs as a
    # run's would, and the host's drift between the two is not cancelled.
    interleaves: bool = True

    def __post_init__(self) -> None:
        if not _FAMILY.fullmatch(self.family):
            raise ValueError(f"benchmark {self.name}: a family is a lowercase name, "
                             f"not {self.family!r}")
        for entry in (self.entry, *self.views):
            if ":" not in entry:
                raise ValueError(f"benchmark {self.name}: {entry!r} must be 'module:function'")
        names = [p.name for p in self.params]
        if len(names) != len(set(names)):
            raise ValueError(f"benchmark {self.name}: duplicate parameter names")
        if self.typed is not None:
            check_typed(self.typed, self.params, self.name)

    @property
    def module(self) -> str:
        return self.entry.split(":", 1)[0]

    @property
    def version(self) -> str:
        """A hash of the benchmark's source, so changed code never compares with old results."""
        if not self.sources:
            return source_version(self.module)
        parts = [source_version(m) for m in (self.module, *sorted(self.sources))]
        return hashlib.sha256(":".join(parts).encode()).hexdigest()[:12]

    @property
    def dtypes(self) -> tuple[str, ...]:
        for p in self.params:
            if p.name == "dtype":
                return tuple(p.choices or ())
        return ()

    def case_timeout(self, params: Mapping[str, Any]) -> float:
        """How long one case of these parameters may run before the runner ends it."""
        return self.timeout_s + (self.extra_time(params) if self.extra_time else 0.0)

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def resolve(self, given: dict[str, Any]) -> dict[str, Any]:
        return resolve_params(self.params, given, self.name)

    def case(self, params: Mapping[str, Any], device: str) -> Case:
        """The case of these resolved parameters on `device`: the one place a benchmark and
        its parameters become an identity. Switches left at an "off" default (cast=False,
        warmup=0, config=), and parameters that say so left at their default
        (tolerance_scale=1), are not shown in tables; the identity keeps them anyway. A
        parameter that does not apply to these and says UNKEYED (`Param.in_identity`:
        `reduce` of an all-gather) is no part of the identity."""
        identity = {name: value for name, value in params.items()
                    if (declared := self.param(name)) is None or declared.in_identity(params)}
        shown = [name for name, value in identity.items()
                 if not self._off_default(name, value)]
        return Case.make(self.name, self.version, self.family, identity, device, shown,
                         self.check)

    def environment(self, params: Mapping[str, Any], device: DeviceInfo) -> WorkerEnv:
        """The environment this case's worker process starts with (before the user's own)."""
        return self.worker_env(params, device) if self.worker_env else NONE

    def worker_identity(self, params: Mapping[str, Any], device: DeviceInfo) -> tuple[str, str]:
        """Cases with different identities never share a worker process."""
        key = self.worker_key(params) if self.worker_key else ""
        return key, self.environment(params, device).describe()

    def _off_default(self, name: str, value: Any) -> bool:
        declared = self.param(name)
        return (declared is not None and declared.default == value
                and (value in _OFF or declared.quiet_default))

    def load(self) -> MeasureFn:
        measure: MeasureFn = resolve_entry(self.entry)
        return measure

    def measure(self, ctx: CaseContext, params: Mapping[str, Any]) -> CaseResult:
        """Measure one case of these resolved parameters: the entry point called with
        them as its parameters class (`typed`), or as a dict."""
        given = typed_params(self.typed, params) if self.typed is not None else dict(params)
        result: CaseResult = self.load()(ctx, given)
        return result

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "family": self.family,
            "summary": self.summary,
            "version": self.version,
            "devices": list(self.devices),
            "dtypes": list(self.dtypes),
            "params": [p.describe() for p in self.params],
            "timeout_s": self.timeout_s,
            "distributed": self.distributed,
            "min_ranks": self.min_ranks,
        }


def resolve_entry(entry: str) -> Any:
    """The function a "module:function" entry names, its module imported now."""
    module, _, attr = entry.partition(":")
    return getattr(importlib.import_module(module), attr)


@cache
def source_version(module: str) -> str:
    """Hash of a module's syntax tree, less what cannot change a number: comments,
    formatting, docstrings' layout, type annotations (and imports made only for them)
    and a declaration's report views leave it as it is."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"cannot find the source of {module}")
    with open(spec.origin, encoding="utf-8") as f:
        tree = _Unannotated().visit(ast.parse(f.read()))
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:12]


class _Unannotated(ast.NodeTransformer):
    """Removes type annotations, `if TYPE_CHECKING:` blocks, `from __future__`, the
    typing names that serve only annotations and the `views` of declarations."""

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.annotation = None
        return node

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        node.returns = None
        self.generic_visit(node)
        return node

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        self.generic_visit(node)
        if node.value is not None and node.simple:
            return ast.Assign(targets=[node.target], value=node.value)
        # A bare declaration stays (a dataclass field is one); its type does not.
        node.annotation = ast.Constant(None)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        # Benchmark(..., views=...): how results are shown, not what is measured.
        if isinstance(node.func, ast.Name) and node.func.id == "Benchmark":
            node.keywords = [k for k in node.keywords if k.arg != "views"]
        self.generic_visit(node)
        return node

    def visit_If(self, node: ast.If) -> ast.AST | None:
        test = node.test
        name = test.id if isinstance(test, ast.Name) else (
            test.attr if isinstance(test, ast.Attribute) else None)
        if name == "TYPE_CHECKING" and not node.orelse:
            return None
        self.generic_visit(node)
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST | None:
        if node.module == "__future__":
            return None
        if node.module == "typing":  # names that only annotate
            node.names = [a for a in node.names if a.name not in _ANNOTATION_ONLY]
            return node if node.names else None
        return node


_ANNOTATION_ONLY = frozenset({"TYPE_CHECKING", "Any"})


