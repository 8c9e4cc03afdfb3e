"""What a run was asked for: a frozen, typed, versioned value.

A `RunRequest` holds everything a run was asked to do (the selection and the parameter
values given, the device, the timing settings, processes, ranks and backend, threads,
timeouts, repeats and where its report goes) and nothing about where it is stored: a
store URL may hold a secret, and the store is the caller's to open. It is built by a
command's options, by `accelbench.run(...)`, read from a file (`run --request FILE`) or
from the store (`run --resume`), and it is what crosses every process boundary as JSON:
torchrun ranks, profile ranks and Slurm jobs receive it, so what a run was asked can be
shown, diffed, stored and replayed.

Its JSON form carries `format`. History:
  1: the first stored form. Runs stored before requests were (format-less, with only
     their command line) get theirs from it once, by `core.request_argv`.
  2: adds `ab`, for the two runs of an `accelbench ab` (`AbRequest`); a format-1 request
     reads as one with none.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeAlias

from accelbench.core.sequential import HORIZON
from accelbench.errors import UserError

REQUEST_FORMAT = 2
RUN = "run"
AB = "ab"

# A parameter's value as a request carries it: text to be parsed by the parameter (from
# a command line or a file), or a typed value a command set itself.
Value: TypeAlias = str | int | float | bool
# A timing setting's value (core.timing.TimingPolicy): a number, a switch, or names.
Setting: TypeAlias = int | float | bool | tuple[str, ...]


class RequestError(UserError):
    """A request that does not read: its JSON path and what is wrong, in one line."""


@dataclass(frozen=True)
class ProfileRequest:
    """How `accelbench profile` runs its one case under the PyTorch profiler: steps run
    without it (`wait`), profiled but discarded (`warmup`) and recorded (`active`), with
    memory recorded or not, traces written under `output` (None: beside the store)."""

    wait: int = 1
    warmup: int = 2
    active: int = 5
    memory: bool = False
    output: str | None = None


@dataclass(frozen=True)
class Stack:
    """One side of an A/B: the Python interpreter its processes run (None: this one) and
    the environment variables set for them, over this process's own."""

    python: str | None = None
    env: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        """The stack as shown: its interpreter and variables, a secret's value as ***."""
        words = [self.python or "this Python"]
        words += [f"{name}={'***' if SECRET_NAME.search(name) else value}"
                  for name, value in self.env]
        return " ".join(words)


@dataclass(frozen=True)
class AbRequest:
    """`accelbench ab`: the request's cases measured under two stacks on this machine, in
    pairs of processes, round after round until each case is decided or the budget is
    spent (core.sequential). Stored with each side's run, with the pair's `id` and
    which `side` the run is ("a" or "b")."""

    a: Stack = field(default_factory=Stack)
    b: Stack = field(default_factory=Stack)
    min_effect: float = 0.05  # the smallest change called faster or slower (a fraction)
    alpha: float = 0.05  # the chance of any false call over the A/B's cases
    max_rounds: int = HORIZON  # pairs of processes per case at most (core.sequential)
    budget: float | None = None  # seconds for all rounds; None: no limit but max_rounds
    fail_on_regression: float | None = None  # the gate (a fraction); None: no gate
    id: str | None = None  # set when stored: the A/B both runs belong to
    side: str | None = None  # set when stored: "a" or "b"


@dataclass(frozen=True)
class RunRequest:
    """What one run was asked for (see the module's docstring)."""

    # The command that asked for it: how its outcome is printed, and `run --resume` goes
    # on only with a request of `run`.
    command: str = RUN
    suite: str = "quick"
    benches: tuple[str, ...] = ()  # empty: every benchmark of the suite
    # Per parameter name, the text of each value given (`-p NAME=TEXT`), as written: the
    # parameter splits it (commas make a grid, unless its one value holds commas).
    overrides: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Per parameter name, values a command sets itself (validate's --burn): typed, never
    # split.
    values: Mapping[str, tuple[Value, ...]] = field(default_factory=dict)
    dtypes: tuple[str, ...] = ()
    device: str = "auto"
    # Timing settings over the suite's (core.timing.TimingPolicy's fields).
    timing: Mapping[str, Setting] = field(default_factory=dict)
    # Ranks for distributed benchmarks (torchrun on this node); None: as the suite says,
    # else one.
    nproc_per_node: int | None = None
    backend: str | None = None  # collective backend; None: from the device
    # CPU threads per process (None: all but one of the CPUs this process may use, split
    # between the ranks of a distributed case: runner.capacity); part of each CPU case's
    # identity.
    threads: int | None = None
    wait_quiet: float | None = None  # seconds to wait for a quiet host before each case
    oversubscribe: bool = False  # more CPU ranks than the node has cores or memory for
    case_timeout: float | None = None  # None: each benchmark's own
    repeat: int | None = None  # runs in a row; None: the suite's
    report: str | None = None  # the report file; None: reports/RUN.html beside the store
    no_report: bool = False
    profile: ProfileRequest | None = None  # `accelbench profile`: under the profiler
    ab: AbRequest | None = None  # `accelbench ab`: two stacks, paired

    def replace(self, **changes: Any) -> RunRequest:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, every field present, with its format."""
        out: dict[str, Any] = {"format": REQUEST_FORMAT}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, Mapping):
                value = {k: list(v) if isinstance(v, tuple) else v for k, v in value.items()}
            elif isinstance(value, ProfileRequest | AbRequest):
                value = _plain(dataclasses.asdict(value))
            out[f.name] = value
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n"

    @classmethod
    def from_dict(cls, data: object, where: str = "request") -> RunRequest:
        """The request of a JSON form that may come from anywhere (a file a user hands
        in, a stored record): every key known, every value of its type and finite, the
        format one this accelbench reads; RequestError naming the first bad value."""
        return _read(data, where)

    @classmethod
    def from_json(cls, text: str | bytes, where: str = "request") -> RunRequest:
        """The request of JSON text from anywhere, within the caps of untrusted input."""
        from accelbench.core.untrusted import parse_json

        data = parse_json(text, where, RequestError, max_depth=8, max_nodes=_MAX_NODES,
                          not_json=": not a JSON request")
        return cls.from_dict(data, where)


def _plain(value: Any) -> Any:
    """dataclasses.asdict's output in JSON's kinds: tuples as lists."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


# -- reading an untrusted JSON form ------------------------------------------------------

_TEXT_FIELDS = ("command", "suite", "device")
_NAMES_FIELDS = ("benches", "dtypes")
_OPTIONAL_INT = ("nproc_per_node", "threads", "repeat")
_OPTIONAL_SECONDS = ("wait_quiet", "case_timeout")
_OPTIONAL_TEXT = ("backend", "report")
_SWITCHES = ("oversubscribe", "no_report")
# A variable's name that says its value is a secret: never stored or shown.
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|KEY|AUTH", re.IGNORECASE)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}")
_MAX_ITEMS = 10_000  # names or values in one list: a request is small
_MAX_NODES = 100_000


def _read(data: object, where: str) -> RunRequest:
    d = _mapping(data, where)
    known = {f.name for f in fields(RunRequest)} | {"format"}
    unknown = sorted(set(d) - known)
    if unknown:
        raise RequestError(f"{where}: unknown key {unknown[0]!r}")
    fmt = d.get("format")
    if isinstance(fmt, bool) or not isinstance(fmt, int) or fmt < 1:
        raise RequestError(f"{where}.format: expected a format number, got {fmt!r}")
    if fmt > REQUEST_FORMAT:
        raise RequestError(f"{where}: written by a newer accelbench (request format {fmt}; "
                           f"this one reads up to {REQUEST_FORMAT})")
    given: dict[str, Any] = {}
    for name in _TEXT_FIELDS:
        if name in d:
            given[name] = _text(d[name], f"{where}.{name}")
    for name in _NAMES_FIELDS:
        if name in d:
            given[name] = tuple(_text(v, f"{where}.{name}[{i}]")
                                for i, v in enumerate(_list(d[name], f"{where}.{name}")))
    for name in _OPTIONAL_INT:
        if d.get(name) is not None:
            given[name] = _positive_int(d[name], f"{where}.{name}")
    for name in _OPTIONAL_SECONDS:
        if d.get(name) is not None:
            given[name] = _positive_number(d[name], f"{where}.{name}")
    for name in _OPTIONAL_TEXT:
        if d.get(name) is not None:
            given[name] = _text(d[name], f"{where}.{name}")
    for name in _SWITCHES:
        if name in d:
            given[name] = _switch(d[name], f"{where}.{name}")
    if "overrides" in d:
        given["overrides"] = {
            _text(k, f"{where}.overrides"): tuple(
                _text(v, f"{where}.overrides.{k}[{i}]")
                for i, v in enumerate(_list(values, f"{where}.overrides.{k}")))
            for k, values in _mapping(d["overrides"], f"{where}.overrides").items()}
    if "values" in d:
        given["values"] = {
            _text(k, f"{where}.values"): tuple(
                _scalar(v, f"{where}.values.{k}[{i}]")
                for i, v in enumerate(_list(values, f"{where}.values.{k}")))
            for k, values in _mapping(d["values"], f"{where}.values").items()}
    if "timing" in d:
        given["timing"] = _timing(d["timing"], f"{where}.timing")
    if d.get("profile") is not None:
        given["profile"] = _profile(d["profile"], f"{where}.profile")
    if d.get("ab") is not None:
        given["ab"] = _ab(d["ab"], f"{where}.ab")
    return RunRequest(**given)


def _timing(data: object, where: str) -> dict[str, Setting]:
    from accelbench.core.timing import TimingPolicy

    known = {f.name for f in fields(TimingPolicy)}
    out: dict[str, Setting] = {}
    for name, value in _mapping(data, where).items():
        if name not in known:
            raise RequestError(f"{where}: unknown timing setting {name!r}")
        if isinstance(value, list):
            out[name] = tuple(_text(v, f"{where}.{name}[{i}]") for i, v in enumerate(
                _list(value, f"{where}.{name}")))
        else:
            scalar = _scalar(value, f"{where}.{name}")
            if isinstance(scalar, str):
                raise RequestError(f"{where}.{name}: expected a number or a switch, "
                                   f"got {value!r}")
            out[name] = scalar
    return out


def _profile(data: object, where: str) -> ProfileRequest:
    d = _mapping(data, where)
    unknown = sorted(set(d) - {f.name for f in fields(ProfileRequest)})
    if unknown:
        raise RequestError(f"{where}: unknown key {unknown[0]!r}")
    given: dict[str, Any] = {}
    for name in ("wait", "warmup"):
        if name in d:
            given[name] = _count(d[name], f"{where}.{name}", at_least=0)
    if "active" in d:
        given["active"] = _count(d["active"], f"{where}.active", at_least=1)
    if "memory" in d:
        given["memory"] = _switch(d["memory"], f"{where}.memory")
    if d.get("output") is not None:
        given["output"] = _text(d["output"], f"{where}.output")
    return ProfileRequest(**given)


_SIDES = ("a", "b")
_MAX_ROUNDS = 100_000


def _ab(data: object, where: str) -> AbRequest:
    d = _mapping(data, where)
    unknown = sorted(set(d) - {f.name for f in fields(AbRequest)})
    if unknown:
        raise RequestError(f"{where}: unknown key {unknown[0]!r}")
    given: dict[str, Any] = {}
    for name in _SIDES:
        if name in d:
            given[name] = _stack(d[name], f"{where}.{name}")
    for name in ("min_effect", "alpha"):
        if name in d:
            given[name] = _fraction(d[name], f"{where}.{name}", zero=name == "min_effect")
    if "max_rounds" in d:
        given["max_rounds"] = _count(d["max_rounds"], f"{where}.max_rounds", at_least=2)
        if given["max_rounds"] > _MAX_ROUNDS:
            raise RequestError(f"{where}.max_rounds: at most {_MAX_ROUNDS}")
    if d.get("budget") is not None:
        given["budget"] = _positive_number(d["budget"], f"{where}.budget")
    if d.get("fail_on_regression") is not None:
        given["fail_on_regression"] = _fraction(d["fail_on_regression"],
                                                f"{where}.fail_on_regression")
    if d.get("id") is not None:
        given["id"] = _text(d["id"], f"{where}.id")
    if d.get("side") is not None:
        side = _text(d["side"], f"{where}.side")
        if side not in _SIDES:
            raise RequestError(f"{where}.side: expected 'a' or 'b', got {side!r}")
        given["side"] = side
    return AbRequest(**given)


def _stack(data: object, where: str) -> Stack:
    d = _mapping(data, where)
    unknown = sorted(set(d) - {"python", "env"})
    if unknown:
        raise RequestError(f"{where}: unknown key {unknown[0]!r}")
    python = _text(d["python"], f"{where}.python") if d.get("python") is not None else None
    env: list[tuple[str, str]] = []
    for i, item in enumerate(_list(d.get("env", []), f"{where}.env")):
        pair = _list(item, f"{where}.env[{i}]")
        if len(pair) != 2:
            raise RequestError(f"{where}.env[{i}]: expected [NAME, VALUE]")
        name = _text(pair[0], f"{where}.env[{i}][0]")
        if not _ENV_NAME.fullmatch(name):
            raise RequestError(f"{where}.env[{i}][0]: not a variable name: {name!r}")
        if not isinstance(pair[1], str) or "\0" in pair[1]:
            raise RequestError(f"{where}.env[{i}][1]: expected a text, got {pair[1]!r}")
        env.append((name, pair[1]))
    return Stack(python, tuple(env))


def _fraction(value: object, where: str, zero: bool = False) -> float:
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or not (0 <= value < 1 if zero else 0 < value < 1)):
        raise RequestError(f"{where}: expected a number {'from 0' if zero else 'above 0'} "
                           f"and below 1, got {value!r}")
    return float(value)


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise RequestError(f"{where}: expected an object, got {type(value).__name__}")
    if len(value) > _MAX_ITEMS:
        raise RequestError(f"{where}: more than {_MAX_ITEMS} entries")
    return value


def _list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise RequestError(f"{where}: expected a list, got {type(value).__name__}")
    if len(value) > _MAX_ITEMS:
        raise RequestError(f"{where}: more than {_MAX_ITEMS} entries")
    return value


def _text(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise RequestError(f"{where}: expected a non-empty text, got {value!r}")
    return value


def _switch(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise RequestError(f"{where}: expected true or false, got {value!r}")
    return value


def _scalar(value: object, where: str) -> Value:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise RequestError(f"{where}: expected a finite number, got {value!r}")
        return value
    raise RequestError(f"{where}: expected a text, a number or a switch, got {value!r}")


def _count(value: object, where: str, at_least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < at_least:
        raise RequestError(f"{where}: expected a whole number of at least {at_least}, "
                           f"got {value!r}")
    return value


def _positive_int(value: object, where: str) -> int:
    return _count(value, where, at_least=1)


def _positive_number(value: object, where: str) -> float:
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or value <= 0):
        raise RequestError(f"{where}: expected a positive, finite number, got {value!r}")
    return float(value)
