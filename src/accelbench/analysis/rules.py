"""Diagnosis rules, written in YAML and read as data: nothing in a rule is ever evaluated.

    rules:
      - name: gemm-bf16             # optional; "rule N" by default
        metric: "gemm dtype=bf16"   # case pattern: benchmark glob, then NAME=GLOB parameters
        family: micro               # optional: only cases of this family
        figure: throughput          # optional glob on the figure name; default: headline
        compare: ratio_to_baseline  # ratio_to_baseline | value | pct_of_peak | cv | status
        min: 0.95                   # the compared number must be at least this ...
        max: 1.50                   # ... and at most this (either or both)
        max_cv: 0.05                # optional: the samples' coefficient of variation too
        category: compute           # what kind of fault a failure points to
        description: ...            # optional, shown in reports

`ratio_to_baseline` divides the node's figure by the baseline's (same case, same
benchmark version); `value` and `pct_of_peak` take the figure as it is; `cv` is the
coefficient of variation of the raw samples; `status` fails a case that failed, was
skipped, or is missing where the baseline has it.
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from accelbench.analysis.select import CasePattern, parse_case_pattern
from accelbench.core.case import Case, renamed_family
from accelbench.core.untrusted import parse_yaml, read_text, short
from accelbench.errors import UserError

RATIO = "ratio_to_baseline"
VALUE = "value"
PCT_OF_PEAK = "pct_of_peak"
CV = "cv"
STATUS = "status"
COMPARES = (RATIO, VALUE, PCT_OF_PEAK, CV, STATUS)
FIELDS = ("name", "metric", "family", "figure", "compare", "min", "max", "max_cv", "category",
          "description")
DEFAULT_RULES = "default_rules.yaml"


@dataclass(frozen=True)
class Rule:
    name: str
    metric: CasePattern
    compare: str
    category: str
    family: str | None = None
    figure: str | None = None  # glob on figure names; None: the headline figure
    min: float | None = None
    max: float | None = None
    max_cv: float | None = None
    description: str = ""

    def applies(self, case: Case) -> bool:
        return (self.family is None or case.family == self.family) and self.metric.matches(case)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "metric": self.metric.text, "family": self.family,
                "figure": self.figure, "compare": self.compare, "min": self.min,
                "max": self.max, "max_cv": self.max_cv, "category": self.category,
                "description": self.description or None}


def load_rules(path: str | Path | None = None) -> list[Rule]:
    """Rules from a YAML file; None: the rules shipped with accelbench."""
    if path is None:
        text = resources.files("accelbench.analysis").joinpath(DEFAULT_RULES).read_text("utf-8")
        return parse_rules(text, "default rules")
    return parse_rules(read_text(path, "rules file"), str(path))


def parse_rules(text: str, source: str = "rules") -> list[Rule]:
    """Rules from YAML text, read as untrusted (`core.untrusted`: size, depth and alias
    caps); every check is linear in the number of rules."""
    data = parse_yaml(text, source)
    if not isinstance(data, dict) or "rules" not in data:
        raise UserError(f"{source}: expected a mapping with a 'rules' list")
    unknown = sorted(set(map(str, data)) - {"rules", "version"})
    if unknown:
        raise UserError(f"{source}: unknown top-level field {short(unknown[0])} (fields: "
                        "rules, version)")
    version = data.get("version", 1)
    if isinstance(version, bool) or version != 1:
        raise UserError(f"{source}: rules version {short(version)} is not one this "
                        "accelbench reads (1)")
    items = data["rules"]
    if not isinstance(items, list) or not items:
        raise UserError(f"{source}: 'rules' must be a non-empty list")
    rules = [_rule(item, i, source) for i, item in enumerate(items, 1)]
    counts = Counter(r.name for r in rules)
    duplicate = next((r.name for r in rules if counts[r.name] > 1), None)
    if duplicate is not None:
        raise UserError(f"{source}: two rules are named {short(duplicate)}")
    return rules


def _rule(item: object, index: int, source: str) -> Rule:
    where = f"{source}: rule {index}"
    if not isinstance(item, dict):
        raise UserError(f"{where}: expected a mapping of fields, got {type(item).__name__}")
    name = item.get("name", f"rule {index}")
    if not isinstance(name, str) or not name.strip():
        raise UserError(f"{where}: 'name' must be a non-empty string")
    where = f"{where} ({short(name.strip())[1:-1]})"
    unknown = sorted(set(map(str, item)) - set(FIELDS))
    if unknown:
        raise UserError(f"{where}: unknown field {short(unknown[0])} "
                        f"(fields: {', '.join(FIELDS)})")
    for required in ("metric", "compare", "category"):
        if required not in item:
            raise UserError(f"{where}: missing field {required!r}")
    metric = _text(item, "metric", where)
    try:
        pattern = parse_case_pattern(metric)
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    compare = _text(item, "compare", where)
    if compare not in COMPARES:
        raise UserError(f"{where}: unknown compare {short(compare)} "
                        f"(one of {', '.join(COMPARES)})")
    low, high, max_cv = (_number(item, k, where) for k in ("min", "max", "max_cv"))
    if compare != STATUS and low is None and high is None and max_cv is None:
        raise UserError(f"{where}: give 'min', 'max' or 'max_cv'")
    if low is not None and high is not None and low > high:
        raise UserError(f"{where}: 'min' ({low}) is above 'max' ({high})")
    return Rule(
        name=name.strip(), metric=pattern, compare=compare,
        category=_text(item, "category", where),
        # A family of the name it had before families were named after their packages
        # (`model`, `collective`) is that family still.
        family=renamed_family(_text(item, "family", where)) if "family" in item else None,
        figure=_text(item, "figure", where) if "figure" in item else None,
        min=low, max=high, max_cv=max_cv,
        description=_text(item, "description", where) if "description" in item else "",
    )


def _text(item: dict[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{where}: {key!r} must be a non-empty string")
    return value.strip()


def _number(item: dict[str, Any], key: str, where: str) -> float | None:
    if key not in item:
        return None
    value = item[key]
    # YAML 1.1 reads 1e-3 (no dot) as text: accept numbers written that way too.
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value)
    try:
        number = float(value) if isinstance(value, (int, float)) else math.nan
    except OverflowError:  # an integer beyond any float
        number = math.inf
    if isinstance(value, bool) or not math.isfinite(number):
        raise UserError(f"{where}: {key!r} must be a number, got {short(item[key])}")
    return number
