"""Typed benchmark parameters: declared once, validated on the way in.

A benchmark declares its parameters with a kind, a default and optional constraints;
values that arrive as text (command line, suite files) are parsed and checked here, so
a bad value is a one-line UserError before anything runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from accelbench.errors import UserError

T = TypeVar("T")

_KINDS: dict[str, type] = {"int": int, "float": float, "str": str, "bool": bool}

# (NAME, VALUES): while parameter NAME has one of VALUES.
Condition = tuple[str, tuple[Any, ...]]
# Where a parameter does not apply (`Param.only_when`), it is left out of the case's
# parameters (OMIT), or kept at its default (DEFAULT): the identity of the cases it does
# not apply to is then the one they had before the parameter was conditional; or kept at
# its default for the measure function and left out of the case's identity (UNKEYED):
# for a parameter every case's code reads but only some cases' numbers depend on
# (`pinned` of a device copy, `seq` of a vision model), which neither splits the cases
# it does not apply to nor shows in their keys and labels.
OMIT = "omit"
DEFAULT = "default"
UNKEYED = "unkeyed"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Param:
    """One parameter of a benchmark."""

    name: str
    kind: str  # one of "int", "float", "str", "bool"
    default: Any
    help: str = ""
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    # Extra validation for values with structure (e.g. a GEMM shape); returns an
    # error message, or None when the value is fine.
    check: Callable[[Any], str | None] | None = None
    # On the command line, commas separate the values of a grid (`-p shape=512,1024`);
    # a parameter whose one value holds commas (`-p config=layers=4,hidden=256`) says
    # False, and a grid of it is given by repeating -p.
    grid: bool = True
    # A Condition, or several of which any one will do: the parameter means something
    # only then (fp8's `fast_accum`, only for dtype fp8; an int8 recipe, only for the int8
    # engine). Elsewhere it is left out of the resolved parameters, or kept at its default
    # (`outside`), so it neither multiplies a grid's cases nor changes the identity of
    # the cases it cannot change, and a grid crossed with it keeps its other cases.
    only_when: Condition | tuple[Condition, ...] | None = None
    outside: str = OMIT
    # Left at its default, a table does not show it (a scale of 1 that changes nothing).
    quiet_default: bool = False

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"parameter {self.name}: unknown kind {self.kind!r}")
        if self.outside not in (OMIT, DEFAULT, UNKEYED):
            raise ValueError(f"parameter {self.name}: unknown outside {self.outside!r}")

    @property
    def conditions(self) -> tuple[Condition, ...]:
        """The conditions of `only_when`, any one of which makes the parameter apply."""
        if self.only_when is None:
            return ()
        if isinstance(self.only_when[0], str):
            return (self.only_when,)  # one Condition
        return self.only_when  # several

    def applies(self, params: Mapping[str, Any]) -> bool:
        """Whether the parameter means something among these resolved parameters."""
        return not self.conditions or any(params.get(name) in values
                                          for name, values in self.conditions)

    def in_identity(self, params: Mapping[str, Any]) -> bool:
        """Whether the parameter is part of the identity of the case of these resolved
        parameters: everywhere it applies, and where it does not unless it says UNKEYED."""
        return self.outside != UNKEYED or self.applies(params)

    def condition_text(self) -> str:
        """Where it applies, in words: `dtype fp8` or `engine int8, or int8 ort-dynamic`."""
        from accelbench.core.case import label_value

        return ", or ".join(f"{name} {' | '.join(label_value(v) for v in values)}"
                            for name, values in self.conditions)

    def split(self, text: str) -> tuple[str, ...]:
        """The values one `-p NAME=TEXT` gives; refuses empty ones rather than guess."""
        if not self.grid:
            if not text.strip():
                raise UserError(f"parameter {self.name}: empty value")
            return (text.strip(),)
        parts = [part.strip() for part in text.split(",")]
        if not all(parts):
            raise UserError(f"parameter {self.name}={text!r}: empty value between commas")
        return tuple(dict.fromkeys(parts))

    def parse(self, value: Any, benchmark: str = "") -> Any:
        """Convert text or a loaded value to this parameter's kind and validate it."""
        where = f"{benchmark}: " if benchmark else ""
        try:
            converted = _convert(self.kind, value)
        except (TypeError, ValueError):
            what = "a finite number" if self.kind == "float" else f"a valid {self.kind}"
            raise UserError(
                f"{where}parameter {self.name}={value!r} is not {what}"
            ) from None
        self.validate(converted, benchmark)
        return converted

    def validate(self, value: Any, benchmark: str = "") -> None:
        where = f"{benchmark}: " if benchmark else ""
        if self.choices is not None and value not in self.choices:
            allowed = ", ".join(str(c) for c in self.choices)
            raise UserError(f"{where}parameter {self.name}={value!r} is not one of: {allowed}")
        if self.minimum is not None and value < self.minimum:
            raise UserError(f"{where}parameter {self.name}={value} is below {self.minimum}")
        if self.maximum is not None and value > self.maximum:
            raise UserError(f"{where}parameter {self.name}={value} is above {self.maximum}")
        if self.check is not None:
            problem = self.check(value)
            if problem:
                raise UserError(f"{where}parameter {self.name}={value!r}: {problem}")

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "default": self.default}
        if self.choices is not None:
            out["choices"] = list(self.choices)
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        if self.help:
            out["help"] = self.help
        if self.conditions:
            out["only_when"] = {name: list(values) for name, values in self.conditions}
            out["outside"] = self.outside
        return out


def _convert(kind: str, value: Any) -> Any:
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ValueError(value)
    if kind == "int":
        if isinstance(value, bool):
            raise TypeError(value)
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(value)
        return int(str(value).strip()) if isinstance(value, str) else int(value)
    if kind == "float":
        if isinstance(value, bool):
            raise TypeError(value)
        number = float(value)
        # NaN passes every bound (each comparison is false) and inf is no setting.
        if not math.isfinite(number):
            raise ValueError(value)
        return number
    return str(value)


def resolve_params(
    params: tuple[Param, ...], given: Mapping[str, Any], benchmark: str = ""
) -> dict[str, Any]:
    """Fill defaults, parse given values and refuse unknown names; a parameter that does
    not apply to the others' values (`Param.only_when`) is checked, then left out or kept
    at its default, as it says (until nothing changes: one set aside can make another
    stop applying)."""
    by_name = {p.name: p for p in params}
    unknown = sorted(set(given) - set(by_name))
    if unknown:
        known = ", ".join(sorted(by_name)) or "none"
        raise UserError(
            f"{benchmark}: unknown parameter {unknown[0]!r} (parameters: {known})"
        )
    resolved = {}
    for p in params:
        resolved[p.name] = p.parse(given[p.name], benchmark) if p.name in given else p.default
    changed = True
    while changed:
        changed = False
        for p in params:
            if p.name not in resolved or p.applies(resolved):
                continue
            if p.outside == OMIT:
                del resolved[p.name]
                changed = True
            elif resolved[p.name] != p.default:
                resolved[p.name] = p.default
                changed = True
    return resolved


# A parameter's kind, as the field of a typed parameters class must declare it.
_FIELD_TYPES: dict[str, tuple[type, ...]] = {"int": (int,), "float": (float,),
                                             "str": (str,), "bool": (bool,)}


def check_typed(cls: type, params: tuple[Param, ...], benchmark: str) -> None:
    """That `cls`, a frozen dataclass, has one field per declared parameter (`field_name`)
    and no other,
    each of the parameter's kind, and that a parameter which may be left out of a case
    (`only_when` with OMIT) is `X | None` with a default of None: a declaration and its
    class cannot drift apart (ValueError when the registry is built)."""
    import dataclasses
    import typing

    if not (dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen):  # type: ignore[attr-defined]
        raise ValueError(f"benchmark {benchmark}: {cls.__name__} is not a frozen dataclass")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    declared = {field_name(p.name): p for p in params}
    if set(fields) != set(declared):
        extra = sorted(set(fields) - set(declared))
        missing = sorted(set(declared) - set(fields))
        raise ValueError(f"benchmark {benchmark}: {cls.__name__} does not match its "
                         f"parameters (fields not declared: {extra}; parameters without "
                         f"a field: {missing})")
    for name, p in declared.items():
        hint = hints[name]
        args = typing.get_args(hint)
        optional = type(None) in args
        kinds = tuple(a for a in args if a is not type(None)) if optional else (hint,)
        if kinds != _FIELD_TYPES[p.kind]:
            raise ValueError(f"benchmark {benchmark}: {cls.__name__}.{name} is {hint}, "
                             f"its parameter is {p.kind}")
        may_be_left_out = bool(p.conditions) and p.outside == OMIT
        if may_be_left_out and not (optional and fields[name].default is None):
            raise ValueError(f"benchmark {benchmark}: {cls.__name__}.{name} must be "
                             f"'{p.kind} | None = None': the parameter applies only where "
                             f"{p.condition_text()}")


def field_name(param: str) -> str:
    """The field of a parameters class that holds the parameter `param`: its name, or
    with a trailing underscore where the name is a Python keyword (attention's `pass`)."""
    import keyword

    return f"{param}_" if keyword.iskeyword(param) else param


def typed_params(cls: type[T], params: Mapping[str, Any]) -> T:
    """A case's resolved parameters as an instance of its benchmark's parameters class
    (a parameter left out of the case, where it does not apply, takes the field's
    default, None)."""
    return cls(**{field_name(name): value for name, value in params.items()})
