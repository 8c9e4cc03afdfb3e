"""The gates a figure of the node is judged against, per GPU model: shipped with accelbench
as data (gates.yaml, each threshold with its source), and overridden or extended by a
site's gates file, which is read as untrusted input (`core.untrusted`: size, depth and
alias caps; nothing in it is evaluated).

    format: 1
    models:
      - model: "AMD Instinct MI300X"   # core.product's product name; "cpu" for any CPU
        vendor: amd                     # amd | nvidia | cpu
        tbp_w: 750                      # optional: the board power
        sources: {rvs: "ROCm Validation Suite, rvs/conf/MI300X/gst_single.conf ..."}
        gates:
          - figure: gemm-bf16           # a catalog figure
            min: 552.0                  # min on a higher-is-better figure, max otherwise
            unit: TFLOP/s               # the catalog's unit, spelled out
            level: 2                    # the lowest validate level that judges it (1..4)
            source: rvs                 # a key of `sources`
            basis: "RVS GST target"     # one line: why this number
            # optional: published + efficiency (then min = published x efficiency to
            # 3 significant digits), link (linked figures), size_mib, per: core (the cpu
            # model: the threshold is per CPU thread a case uses), remove: true (a site
            # file dropping a shipped gate)

A gate is known by its model, figure, link and size: a site file's gate with the same key
replaces the shipped one, others are added, and a model the shipped file lacks is added
whole. Which model's gates apply to a device is decided by `core.product` (`select`).
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from accelbench.benchmarks.qualify import catalog
from accelbench.core.device import DeviceInfo
from accelbench.core.untrusted import parse_yaml, read_text, short
from accelbench.errors import UserError

FORMAT = 1  # 1: the first format
SHIPPED = "gates.yaml"
SHIPPED_ORIGIN = "shipped"
CPU = "cpu"  # the model every CPU device is judged as
VENDORS = ("amd", "nvidia", CPU)
LEVELS = (1, 2, 3, 4)
PERS = ("device", "core")
MAX_GATES_BYTES = 2 * 2**20  # a site file of every GPU model is a few tens of KiB
TOP_FIELDS = ("format", "models")
MODEL_FIELDS = ("model", "vendor", "tbp_w", "sources", "gates")
GATE_FIELDS = ("figure", "min", "max", "unit", "level", "source", "basis", "published",
               "efficiency", "link", "size_mib", "per", "remove")
REMOVE_FIELDS = ("figure", "link", "size_mib", "remove")
# The figures a compute partition gets its share of; the others are not judged there.
THROUGHPUT = tuple(f for f in catalog.FIGURES
                   if f.startswith("gemm-") or (f.startswith("memory-") and f != "memory-size")
                   or f == "train")

GateKey = tuple[str, str | None, float | None]  # figure, link, size_mib


@dataclass(frozen=True)
class Gate:
    model: str
    figure: str
    threshold: float
    direction: str  # "min" | "max"
    unit: str
    level: int
    source_key: str
    source: str  # the full citation
    basis: str
    published: float | None = None
    efficiency: float | None = None
    link: str | None = None
    size_mib: float | None = None
    per: str = "device"  # "device" | "core": times the CPU threads a case uses
    origin: str = SHIPPED_ORIGIN  # or "site file NAME sha256:0123456789ab"

    @property
    def key(self) -> GateKey:
        return self.figure, self.link, self.size_mib

    def threshold_for(self, cores: int = 1) -> float:
        """The threshold a subject measured with `cores` CPU threads is held to."""
        if cores < 1:
            raise ValueError(f"cores must be at least 1, got {cores}")
        return self.threshold * cores if self.per == "core" else self.threshold

    def passes(self, value: float, cores: int = 1) -> bool:
        """Whether `value` is on the right side of the gate (NaN never is)."""
        limit = self.threshold_for(cores)
        if not math.isfinite(value):
            return False
        return value >= limit if self.direction == "min" else value <= limit

    def describe(self) -> str:
        """ "gemm-bf16 ≥ 552 TFLOP/s (RVS GST target ...)" """
        return f"{self.subject()} {self.bound()} ({self.basis})"

    def subject(self) -> str:
        """The figure, narrowed by link and size: "peer over xgmi", "allreduce at 1024 MiB"."""
        text = self.figure
        if self.link:
            text += f" over {self.link}"
        if self.size_mib is not None:
            text += f" at {self.size_mib:g} MiB"
        return text

    def bound(self) -> str:
        """ "≥ 552 TFLOP/s", "≥ 0.0064 TFLOP/s per core" """
        side = "≥" if self.direction == "min" else "≤"
        per = " per core" if self.per == "core" else ""
        return f"{side} {self.threshold:g} {self.unit}{per}"

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "figure": self.figure, "direction": self.direction,
                "threshold": self.threshold, "unit": self.unit, "level": self.level,
                "per": self.per, "link": self.link, "size_mib": self.size_mib,
                "published": self.published, "efficiency": self.efficiency,
                "source_key": self.source_key, "source": self.source, "basis": self.basis,
                "origin": self.origin}


@dataclass(frozen=True)
class ModelGates:
    model: str
    vendor: str
    tbp_w: float | None
    gates: tuple[Gate, ...]
    removed: tuple[GateKey, ...] = ()  # a site file's `remove: true` entries

    def for_figure(self, figure: str, level: int, link: str | None = None
                   ) -> tuple[Gate, ...]:
        """The gates of `figure` a case at `level` judges; with `link`, those of that link
        and those of any link."""
        return tuple(g for g in self.gates if g.figure == figure and g.level <= level
                     and (link is None or g.link in (None, link)))


# ---- reading ----------------------------------------------------------------------------


@functools.cache
def _shipped() -> tuple[tuple[str, ModelGates], ...]:
    text = resources.files("accelbench.benchmarks.qualify").joinpath(SHIPPED).read_text("utf-8")
    return tuple(parse_gates(text, SHIPPED).items())


def load_shipped() -> dict[str, ModelGates]:
    """The gates shipped with accelbench, by model (read once)."""
    return dict(_shipped())


def load_gates(site_file: str | Path | None = None) -> dict[str, ModelGates]:
    """The shipped gates, with a site file's gates replacing those of the same model,
    figure, link and size, added beside them, or removed (`remove: true`)."""
    gates = load_shipped()
    if site_file is None:
        return gates
    text = read_text(site_file, "gates file", max_bytes=MAX_GATES_BYTES)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
    source = str(site_file)
    site = parse_gates(text, source, origin=f"site file {Path(site_file).name} sha256:{digest}")
    for name, ours in site.items():
        base = gates.get(name)
        if base is None:
            gates[name] = replace(ours, removed=())
            continue
        kept = {g.key: g for g in base.gates}
        for key in ours.removed:
            if kept.pop(key, None) is None:
                raise UserError(f"{source}: model {short(name)}: no shipped "
                                f"{_key_text(key)} gate to remove")
        kept.update((g.key, g) for g in ours.gates)
        gates[name] = ModelGates(name, base.vendor,
                                 ours.tbp_w if ours.tbp_w is not None else base.tbp_w,
                                 tuple(kept.values()))
    return gates


def parse_gates(text: str, source: str, *, origin: str = SHIPPED_ORIGIN
                ) -> dict[str, ModelGates]:
    """Gates from YAML text, checked strictly: any problem is one UserError line naming
    `source` and the entry ("gates.yaml: models[2].gates[4]: unknown figure ...")."""
    data = parse_yaml(text, source)
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a mapping with 'format' and 'models'")
    _known(data, TOP_FIELDS, source, "top-level field")
    fmt = data.get("format")
    if "format" not in data:
        raise UserError(f"{source}: missing 'format: {FORMAT}'")
    if isinstance(fmt, bool) or fmt != FORMAT:
        raise UserError(f"{source}: gates format {short(fmt)} is not one this accelbench "
                        f"reads ({FORMAT})")
    models = data.get("models")
    if not isinstance(models, list) or not models:
        raise UserError(f"{source}: 'models' must be a non-empty list")
    found: dict[str, ModelGates] = {}
    for i, item in enumerate(models):
        where = f"{source}: models[{i}]"
        model = _model(item, where, origin)
        if model.model in found:
            raise UserError(f"{where}: model {short(model.model)} is listed twice")
        found[model.model] = model
    return found


def _model(item: object, where: str, origin: str) -> ModelGates:
    if not isinstance(item, dict):
        raise UserError(f"{where}: expected a mapping of fields, got {type(item).__name__}")
    _known(item, MODEL_FIELDS, where, "field")
    name = _text(item, "model", where)
    vendor = _text(item, "vendor", where)
    if vendor not in VENDORS:
        raise UserError(f"{where}: vendor {short(vendor)} is not one of {', '.join(VENDORS)}")
    if (name == CPU) != (vendor == CPU):
        raise UserError(f"{where}: the model {CPU!r} and only it has vendor {CPU!r}")
    tbp = _number(item, "tbp_w", where) if item.get("tbp_w") is not None else None
    if tbp is not None and tbp <= 0:
        raise UserError(f"{where}: 'tbp_w' must be positive, got {short(item['tbp_w'])}")
    sources = item.get("sources", {})
    if not isinstance(sources, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in sources.items()):
        raise UserError(f"{where}: 'sources' must map each key to its citation text")
    items = item.get("gates", [])
    if not isinstance(items, list):
        raise UserError(f"{where}: 'gates' must be a list")
    gates: dict[GateKey, Gate] = {}
    removed: list[GateKey] = []
    for j, entry in enumerate(items):
        at = f"{where}.gates[{j}]"
        gate = _gate(entry, at, name, vendor, sources, origin)
        key = gate.key if isinstance(gate, Gate) else gate
        if key in gates or key in removed:
            raise UserError(f"{at}: a second {_key_text(key)} gate for {short(name)}")
        if isinstance(gate, Gate):
            gates[key] = gate
        else:
            removed.append(key)
    return ModelGates(name, vendor, tbp, tuple(gates.values()), tuple(removed))


def _gate(entry: object, where: str, model: str, vendor: str, sources: Mapping[str, str],
          origin: str) -> Gate | GateKey:
    """A gate, or the key of a gate to remove."""
    if not isinstance(entry, dict):
        raise UserError(f"{where}: expected a mapping of fields, got {type(entry).__name__}")
    _known(entry, GATE_FIELDS, where, "field")
    figure = _text(entry, "figure", where)
    if figure not in catalog.BY_NAME:
        close = difflib.get_close_matches(figure, catalog.FIGURES, n=1)
        hint = (f" (did you mean {close[0]}?)" if close
                else f" (figures: {', '.join(catalog.FIGURES)})")
        raise UserError(f"{where}: unknown figure {short(figure)}{hint}")
    kind = catalog.kind(figure)
    link = entry.get("link")
    if link is not None:
        if not kind.linked:
            raise UserError(f"{where}: {figure} is not measured per link: no 'link'")
        if link not in catalog.LINKS:
            raise UserError(f"{where}: unknown link {short(link)} "
                            f"(links: {', '.join(catalog.LINKS)})")
    size = _number(entry, "size_mib", where) if entry.get("size_mib") is not None else None
    if size is not None:
        if size <= 0:
            raise UserError(f"{where}: 'size_mib' must be positive")
        if not kind.timed:
            raise UserError(f"{where}: {figure} is read, not timed: no 'size_mib'")
    remove = entry.get("remove", False)
    if not isinstance(remove, bool):
        raise UserError(f"{where}: 'remove' must be true or false")
    key: GateKey = (figure, link, size)
    if remove:
        extra = sorted(set(map(str, entry)) - set(REMOVE_FIELDS))
        if extra:
            raise UserError(f"{where}: a gate to remove names only its figure, link and "
                            f"size, not {short(extra[0])}")
        return key
    direction = "min" if kind.higher_is_better else "max"
    wrong = "max" if direction == "min" else "min"
    if wrong in entry:
        better = "higher" if kind.higher_is_better else "lower"
        raise UserError(f"{where}: {figure} is better {better}: its gate is "
                        f"'{direction}', not '{wrong}'")
    if direction not in entry:
        raise UserError(f"{where}: missing field {direction!r}")
    threshold = _number(entry, direction, where)
    unit = _text(entry, "unit", where)
    if unit != kind.unit:
        raise UserError(f"{where}: {figure} is measured in {kind.unit}, not {short(unit)}")
    level = entry.get("level")
    if isinstance(level, bool) or level not in LEVELS:
        raise UserError(f"{where}: 'level' must be one of 1, 2, 3, 4, got {short(level)}")
    source_key = _text(entry, "source", where)
    if source_key not in sources:
        known = ", ".join(sorted(sources)) or "none"
        raise UserError(f"{where}: source {short(source_key)} is not a key of the model's "
                        f"'sources' ({known})")
    basis = _text(entry, "basis", where)
    per = entry.get("per", "device")
    if per not in PERS:
        raise UserError(f"{where}: 'per' must be device or core, got {short(per)}")
    if per == "core" and (vendor != CPU or not kind.higher_is_better):
        raise UserError(f"{where}: 'per: core' is for the {CPU!r} model's higher-is-better "
                        "figures")
    published, efficiency = _published(entry, where, threshold)
    return Gate(model=model, figure=figure, threshold=threshold, direction=direction,
                unit=unit, level=int(level), source_key=source_key,
                source=sources[source_key].strip(), basis=basis, published=published,
                efficiency=efficiency, link=link, size_mib=size, per=per, origin=origin)


def _published(entry: Mapping[str, Any], where: str, threshold: float
               ) -> tuple[float | None, float | None]:
    has = [f for f in ("published", "efficiency") if entry.get(f) is not None]
    if not has:
        return None, None
    if len(has) == 1:
        other = "efficiency" if has[0] == "published" else "published"
        raise UserError(f"{where}: '{has[0]}' needs '{other}' beside it")
    published = _number(entry, "published", where)
    efficiency = _number(entry, "efficiency", where)
    if not 0 < efficiency <= 1:
        raise UserError(f"{where}: 'efficiency' must be above 0 and at most 1")
    if not same_to_3_digits(threshold, published * efficiency):
        raise UserError(f"{where}: the gate {threshold:g} is not published x efficiency "
                        f"({published:g} x {efficiency:g} = {published * efficiency:.4g})")
    return published, efficiency


def same_to_3_digits(a: float, b: float) -> bool:
    """Whether `a` and `b` agree to three significant digits (either rounding of the
    third digit counts)."""
    if a == b:
        return True
    if b == 0 or a == 0:
        return False
    half_unit = 0.5 * 10 ** (math.floor(math.log10(abs(b))) - 2)
    return abs(a - b) <= half_unit * (1 + 1e-9)


def _known(data: Mapping[Any, Any], fields: Sequence[str], where: str, what: str) -> None:
    unknown = sorted(set(map(str, data)) - set(fields))
    if unknown:
        raise UserError(f"{where}: unknown {what} {short(unknown[0])} "
                        f"(fields: {', '.join(fields)})")


def _text(data: Mapping[str, Any], field: str, where: str) -> str:
    if field not in data:
        raise UserError(f"{where}: missing field {field!r}")
    value = data[field]
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{where}: {field!r} must be a non-empty string, got {short(value)}")
    return value.strip()


def _number(data: Mapping[str, Any], field: str, where: str) -> float:
    value = data.get(field)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(f"{where}: {field!r} must be a number, got {short(value)}")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise UserError(f"{where}: {field!r} must be a finite number not below 0, "
                        f"got {short(value)}")
    return number


def _key_text(key: GateKey) -> str:
    figure, link, size = key
    return figure + (f" over {link}" if link else "") + (
        f" at {size:g} MiB" if size is not None else "")


# ---- choosing ---------------------------------------------------------------------------


def select(device: DeviceInfo, gates: Mapping[str, ModelGates]
           ) -> tuple[ModelGates | None, str]:
    """The gates of `device`'s model and what chose them; (None, why) when it has none."""
    from accelbench.core.product import identify

    if device.device_class == "cpu" or device.platform == "cpu":
        found = gates.get(CPU)
        if found is None:
            return None, f"no gates for the CPU: the gates table has no {CPU!r} model"
        return found, (f"gates for any CPU ({CPU!r}), per core: a threshold marked per "
                       "core is times the CPU threads a case uses")
    product = identify(device)
    fit = product.fit
    if fit is not None and fit.name in gates:
        how = f"identified by {product.basis or 'device name'}"
        model = gates[fit.name]
        if fit.partitions == 1:
            return model, f"gates for {fit.name}, {how}"
        shared = _partition(model, fit.partitions, fit.label)
        return shared, (f"gates for {fit.name}, {how} as a {fit.mode} partition (1 of "
                        f"{fit.partitions}): its GEMM, memory bandwidth and training gates "
                        f"divided by {fit.partitions}, the others not judged")
    if device.name in gates:  # a model a site file names as the device calls itself
        return gates[device.name], f"gates for {device.name}, named so in the gates file"
    add = "add it in a site gates file (--gates)"
    if fit is None and product.fits:  # several products it could be
        return None, f"no gates for {device.name!r}: {product.reason}; {add}"
    name = fit.name if fit is not None else device.name
    # Why the product is unknown, where it says more than that it is not in the table.
    said = product.reason if fit is None and device.platform == "rocm" else None
    why = f" ({said})" if said and "is not a GPU in the" not in said else ""
    return None, f"no gates for {name!r}: it is not a GPU in the gates table{why}; {add}"


def _partition(model: ModelGates, parts: int, label: str) -> ModelGates:
    gates = tuple(
        replace(g, model=label, threshold=g.threshold / parts,
                published=None if g.published is None else g.published / parts,
                basis=f"{g.basis}; divided by {parts} for one partition of {parts}")
        for g in model.gates if g.figure in THROUGHPUT)
    return ModelGates(label, model.vendor, None, gates)


# ---- writing ----------------------------------------------------------------------------


def _cell(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def table_markdown(gates: Mapping[str, ModelGates]) -> str:
    """The docs' table of gates (model, figure, gate, level, basis, source), then each
    model's sources in full."""
    lines = ["| Model | Figure | Gate | Level | Basis | Source |",
             "|---|---|---|---:|---|---|"]
    for model in gates.values():
        for g in model.gates:
            lines.append("| " + " | ".join(_cell(c) for c in (
                model.model, g.subject(), g.bound(), g.level, g.basis, g.source_key)) + " |")
    lines += ["", "Sources:", ""]
    for model in gates.values():
        cited: dict[str, str] = {}
        for g in model.gates:
            cited.setdefault(g.source_key, g.source)
        lines.append(f"- **{_cell(model.model)}**"
                     + (f" (board power {model.tbp_w:g} W)" if model.tbp_w else ""))
        lines += [f"    - `{key}`: {_cell(text)}" for key, text in cited.items()]
    return "\n".join(lines) + "\n"


def init_yaml(models: Sequence[ModelGates], level: int) -> str:
    """A site gates file for an operator to edit: `models` with their gates up to
    `level`, each gate's source kept as data; `parse_gates` reads it back to the same
    gates."""
    import yaml

    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level}")
    entries = []
    for model in models:
        chosen = [g for g in model.gates if g.level <= level]
        sources = {g.source_key: g.source for g in chosen}
        entry: dict[str, Any] = {"model": model.model, "vendor": model.vendor}
        if model.tbp_w is not None:
            entry["tbp_w"] = model.tbp_w
        entry["sources"] = sources
        entry["gates"] = [_gate_entry(g) for g in chosen]
        entries.append(entry)
    head = (
        "# A site's gates for accelbench: `qualify --gates FILE`, or ACCELBENCH_GATES=FILE.\n"
        "# Each gate replaces accelbench's gate of the same model, figure, link and size;\n"
        "# a gate with `remove: true` (and only its figure, link and size) drops one; a\n"
        "# new model or figure is added. Change a threshold and say why in `basis`, and\n"
        "# drop `published` and `efficiency` unless the new threshold is their product.\n"
        "# Fields: docs/gates.md.\n")
    body = yaml.safe_dump({"format": FORMAT, "models": entries}, sort_keys=False,
                          allow_unicode=True, width=100)
    return head + body


def _gate_entry(g: Gate) -> dict[str, Any]:
    entry: dict[str, Any] = {"figure": g.figure, g.direction: g.threshold, "unit": g.unit,
                             "level": g.level, "source": g.source_key, "basis": g.basis}
    for field in ("published", "efficiency", "link", "size_mib"):
        if getattr(g, field) is not None:
            entry[field] = getattr(g, field)
    if g.per != "device":
        entry["per"] = g.per
    return entry
